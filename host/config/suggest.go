package config

import (
	"fmt"
	"strings"

	"github.com/rlhost/rlhost/sdk/suggest"
)

// unknownKey says that name is not a key, with the closest known key.
func unknownKey(name string) string {
	msg := fmt.Sprintf("unknown key %q", name)
	if s := suggestKey(name); s != "" {
		return msg + fmt.Sprintf("; did you mean %q?", s)
	}
	return msg + " (docs/config.md lists every key)"
}

func suggestKey(name string) string {
	last := lastPart(name)
	// A typo in the last part: data.train_bach_size -> data.train_batch_size.
	parent := parentOf(name)
	if k, ok := keyByName[parent]; (ok && k.section) || parent == "" || aliasSections[parent] {
		var sibs []string
		for _, s := range childNames[parent] {
			sibs = append(sibs, lastPart(s))
		}
		if s := closest(last, sibs); s != "" {
			if parent == "" {
				return s
			}
			return parent + "." + s
		}
	}
	// The right name in the wrong section: data.ppo_epochs -> actor_rollout_ref.actor.ppo_epochs.
	for _, k := range keyList {
		if !k.section && lastPart(k.name) == last {
			return k.name
		}
	}
	// A typo in a section: actor_rollout_ref.rollot.n -> actor_rollout_ref.rollout.n.
	if s := closest(name, knownNames()); s != "" {
		return s
	}
	seen := map[string]bool{}
	var lasts []string
	for _, k := range keyList {
		if p := lastPart(k.name); !seen[p] && !k.section {
			seen[p] = true
			lasts = append(lasts, p)
		}
	}
	if s := closest(last, lasts); s != "" {
		for _, k := range keyList {
			if lastPart(k.name) == s && !k.section {
				return k.name
			}
		}
	}
	return ""
}

// closest is suggest.Closest kept to near misses: at most a third of the name's
// characters (and at least 2) differ, so that a key that is simply unknown gets
// no misleading suggestion.
func closest(name string, candidates []string) string {
	s := suggest.Closest(name, candidates)
	if s == "" || suggest.EditDistance(strings.ToLower(name), strings.ToLower(s)) > max(2, len([]rune(name))/3) {
		return ""
	}
	return s
}
