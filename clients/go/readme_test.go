package ferry_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeMarker stands before the README's Go example, which this test runs as it is written.
const readmeMarker = "<!-- clients/go/readme_test.go runs the next block -->"

// TestReadmeExampleRuns builds the README's Go example as a program of its own, against this
// module, and runs it against a broker of its own: it must print what it took.
func TestReadmeExampleRuns(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, found := strings.Cut(string(readme), readmeMarker)
	if !found {
		t.Fatalf("README.md has no %q", readmeMarker)
	}
	_, block, found := strings.Cut(after, "```go\n")
	if !found {
		t.Fatal("no ```go block after the marker")
	}
	code, _, _ := strings.Cut(block, "```")

	module, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"main.go": code,
		"go.mod": "module readme.example\n\ngo 1.23\n\nrequire github.com/ferrymq/ferry-go v0.0.0\n\n" +
			"replace github.com/ferrymq/ferry-go => " + module + "\n",
		"go.sum": string(sum),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); os.Getenv("GOROOT") == "" || err != nil {
		goBin = "go"
	}
	tidy := exec.Command(goBin, "mod", "tidy")
	tidy.Dir = dir
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	b := ownBroker(t)
	run := exec.Command(goBin, "run", ".")
	run.Dir = dir
	run.Env = append(os.Environ(), "FERRY_URL="+b.URL)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the example failed: %v\n%s", err, out)
	}
	if got, want := string(out), "took {\"sku\":\"a1\"}\n"; got != want {
		t.Fatalf("the example printed %q, want %q", got, want)
	}
}
