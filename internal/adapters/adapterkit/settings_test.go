package adapterkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMergeJSONSettingsKeepsTheOperatorsKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".cli", "settings.json")
	set := func(settings map[string]any) error {
		obj, err := Section(settings, []string{"telemetry", "enabled"})
		if err != nil {
			return err
		}
		obj["enabled"] = false
		return nil
	}
	if err := MergeJSONSettings(path, set); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"theme":"dark","telemetry":{"enabled":true,"target":"local"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MergeJSONSettings(path, set); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"theme": "dark"`, `"target": "local"`, `"enabled": false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("settings %s lack %s", b, want)
		}
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("settings file mode: %v, %v", info, err)
	}
}

func TestMergeJSONSettingsLeavesACommentedFileToAPerson(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	orig := "{\n  // mine\n  \"a\": 1\n}\n"
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	err := MergeJSONSettings(path, func(map[string]any) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "not plain JSON") {
		t.Errorf("MergeJSONSettings = %v, want a refusal to rewrite a commented file", err)
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Errorf("the file was changed: %q", b)
	}
	err = MergeJSONSettings(filepath.Join(t.TempDir(), "s.json"), func(settings map[string]any) error {
		settings["ui"] = "plain"
		_, err := Section(settings, []string{"ui", "x"})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "not an object") {
		t.Errorf("a section that is no object: %v", err)
	}
}
