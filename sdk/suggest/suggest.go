// Package suggest finds the likely intended name among known ones, for did-you-mean
// messages. The SDK's config decoder (task.DecodeConfig) and the host's config checks share
// it.
package suggest

import "strings"

// Closest returns the candidate closest to name by edit distance (case-insensitive), or "" if
// none is close enough to be a likely typo.
func Closest(name string, candidates []string) string {
	best, bestD := "", len([]rune(name))/2+2
	for _, c := range candidates {
		if d := EditDistance(strings.ToLower(name), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b, in runes.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
