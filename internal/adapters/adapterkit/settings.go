package adapterkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// MergeJSONSettings rewrites the CLI settings file at path with what
// merge changes in it, keeping every key an operator put there, and
// creates it (and its directory) when absent. A file that is not plain
// JSON is an error rather than rewritten: the CLIs accept comments, which
// a rewrite would drop, so a person decides. It is idempotent when merge
// is.
func MergeJSONSettings(path string, merge func(settings map[string]any) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	settings := map[string]any{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case len(bytes.TrimSpace(b)) > 0:
		if err := json.Unmarshal(b, &settings); err != nil {
			return fmt.Errorf("%s is not plain JSON (%v): fix it, or remove it and let the gateway write it", path, err)
		}
		if settings == nil {
			settings = map[string]any{}
		}
	}
	if err := merge(settings); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(out, '\n'))
}

// Section returns the object of settings that holds the last key of path,
// creating the objects on the way. It fails when one on the way is set to
// something else.
func Section(settings map[string]any, path []string) (map[string]any, error) {
	obj := settings
	for i, key := range path[:len(path)-1] {
		switch v := obj[key].(type) {
		case map[string]any:
			obj = v
		case nil:
			next := map[string]any{}
			obj[key] = next
			obj = next
		default:
			return nil, fmt.Errorf("%v is %T, not an object", path[:i+1], v)
		}
	}
	return obj, nil
}

// WriteFileAtomic replaces path with b (mode 0600) by a rename, so that a
// CLI starting meanwhile never reads half a file.
func WriteFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o600)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
