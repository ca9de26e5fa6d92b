package ckpt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// ManifestName is the file, in a checkpoint's folder, that lists every other file of the
// checkpoint with its size and SHA-256. Commit writes it last (after the files are on disk),
// so a checkpoint whose files were cut short or changed afterwards no longer matches it.
const ManifestName = "manifest.json"

// Manifest is the content of manifest.json.
type Manifest struct {
	Format int            `json:"format"` // 1
	Files  []ManifestFile `json:"files"`  // in path order
}

// ManifestFile is one file of a checkpoint.
type ManifestFile struct {
	Path   string `json:"path"` // relative to the checkpoint's folder, with forward slashes
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
}

// ErrNoManifest is a checkpoint without manifest.json: one written before checkpoints carried
// one, which cannot be verified.
var ErrNoManifest = errors.New("ckpt: no " + ManifestName)

// DamagedError is a checkpoint whose files do not match its manifest (or whose manifest is
// unreadable).
type DamagedError struct {
	Dir    string
	Reason string // "actor/model.safetensors is 1024 bytes, the manifest says 270498816"
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("checkpoint %s is damaged: %s", e.Dir, e.Reason)
}

// WriteManifest hashes every file under dir, flushes each to disk, and writes
// dir/manifest.json through a temporary file, flushed and renamed, then flushes dir.
func WriteManifest(dir string) error {
	var m Manifest
	m.Format = 1
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == ManifestName || rel == ManifestName+".tmp" {
			return nil
		}
		size, sum, err := hashFile(path, true)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, ManifestFile{Path: rel, Size: size, SHA256: sum})
		return nil
	})
	if err != nil {
		return fmt.Errorf("ckpt: manifest of %s: %w", dir, err)
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestName+".tmp")
	if err := writeSynced(tmp, append(b, '\n')); err != nil {
		return fmt.Errorf("ckpt: manifest of %s: %w", dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestName)); err != nil {
		return fmt.Errorf("ckpt: manifest of %s: %w", dir, err)
	}
	return syncDir(dir)
}

// Verify checks the checkpoint in dir against its manifest: every file it lists is there, with
// its size and SHA-256. It returns ErrNoManifest for a checkpoint without one, and a
// *DamagedError naming the first file that does not match (or an unreadable manifest).
func Verify(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNoManifest
	}
	if err != nil {
		return &DamagedError{Dir: dir, Reason: err.Error()}
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s is not a manifest (%v)", ManifestName, err)}
	}
	if m.Format != 1 || len(m.Files) == 0 {
		return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s lists no files (format %d)", ManifestName, m.Format)}
	}
	for _, f := range m.Files {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return &DamagedError{Dir: dir, Reason: f.Path + " is missing"}
		case err != nil:
			return &DamagedError{Dir: dir, Reason: err.Error()}
		case st.Size() != f.Size:
			return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s is %d bytes, the manifest says %d", f.Path, st.Size(), f.Size)}
		}
		_, sum, err := hashFile(path, false)
		if err != nil {
			return &DamagedError{Dir: dir, Reason: err.Error()}
		}
		if sum != f.SHA256 {
			return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s does not match its SHA-256 in the manifest", f.Path)}
		}
	}
	return nil
}

// hashFile returns a file's size and hex SHA-256, flushing it to disk first when sync is set.
func hashFile(path string, sync bool) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	if sync {
		if err := f.Sync(); err != nil {
			return 0, "", err
		}
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir flushes a folder's entries (new and renamed files) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
