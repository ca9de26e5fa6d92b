package data

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ExpandFiles resolves the entries of a file list key (data.train_files, data.val_files):
// an entry with a glob pattern (*, ?, [...]) becomes the files it matches, in name order;
// any other entry is kept as it is. A pattern that matches nothing, or a malformed one, is an
// error naming key and entry; a file listed twice (directly or through patterns) is kept once,
// at its first place.
func ExpandFiles(key string, entries []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for i, e := range entries {
		if !strings.ContainsAny(e, "*?[") {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
			continue
		}
		m, err := filepath.Glob(e)
		if err != nil {
			return nil, fmt.Errorf("data: %s[%d] %q: bad glob pattern: %v", key, i, e, err)
		}
		var files []string
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && !st.IsDir() {
				files = append(files, f)
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("data: %s[%d] %q matches no file", key, i, e)
		}
		sort.Strings(files)
		for _, f := range files {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out, nil
}
