package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/hub/hubtest"
	"github.com/bitdecode/bitdecode/model/gotiny"
)

// TestRunFromHub runs --model org/name against a stand-in for the Hub that
// serves the embedded model's files: the first run downloads them into
// HF_HUB_CACHE and generates what the embedded model generates; the second
// finds the snapshot with the network off (HF_HUB_OFFLINE).
func TestRunFromHub(t *testing.T) {
	const sha = "00112233445566778899aabbccddeeff00112233"
	srv := hubtest.New(&hubtest.Repo{Name: "org/gotiny", SHA: sha, Files: gotiny.Files()})
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	args := []string{"--device", "cpu", "--max-tokens", "12", "--repeat-penalty", "1.3", "--compare-fp16=false", "func main() {"}
	run := func(extra ...string) (string, string) {
		var out, errb bytes.Buffer
		if code := runMain(append(append([]string{"run"}, extra...), args...), &out, &errb); code != 0 {
			t.Fatalf("run %v: exit %d: %s", extra, code, errb.String())
		}
		return out.String(), errb.String()
	}
	want, _ := run()
	got, log := run("--model", "org/gotiny")
	if got != want {
		t.Errorf("from the hub %q, embedded %q", got, want)
	}
	if !strings.Contains(log, "hub: org/gotiny: commit "+sha) || !strings.Contains(log, "model.safetensors") {
		t.Errorf("stderr does not tell the download:\n%s", log)
	}
	n := srv.Requests()
	t.Setenv("HF_HUB_OFFLINE", "1")
	again, log := run("--model", "org/gotiny")
	if again != want || srv.Requests() != n || !strings.Contains(log, "cached snapshot") {
		t.Errorf("offline, cached: %q (%d more requests)\n%s", again, srv.Requests()-n, log)
	}
}
