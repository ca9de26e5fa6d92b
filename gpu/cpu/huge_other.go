//go:build !linux

package cpu

func adviseHuge([]byte) {}
