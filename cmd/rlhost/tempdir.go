package main

import (
	"fmt"
	"os"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"
)

// runTemp makes the folder that this process and its plugins keep their temporary files and
// Unix sockets in ($TMPDIR/rlhost-*: TMPDIR and go-plugin's PLUGIN_UNIX_SOCKET_DIR point at it,
// and plugins inherit both), and returns the function that removes it. main calls that when the
// command ends, also after Ctrl-C or SIGTERM, so that no plugin socket or temporary file is left
// behind, even from a plugin that was killed before it could remove its own. A
// PLUGIN_UNIX_SOCKET_DIR the user set is kept (and not removed).
func runTemp() (remove func()) {
	dir, err := os.MkdirTemp("", "rlhost-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlhost: warning: temporary folder:", err)
		return func() {}
	}
	if os.Getenv(goplugin.EnvUnixSocketDir) == "" {
		os.Setenv(goplugin.EnvUnixSocketDir, dir)
	}
	os.Setenv("TMPDIR", dir)
	var once sync.Once
	return func() { once.Do(func() { os.RemoveAll(dir) }) }
}
