package ferry_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// repoRoot is the checkout this module lives in (clients/go is two levels down).
var repoRoot, _ = filepath.Abs("../..")

// shared is the broker most tests use, started once by TestMain; nil when noBroker says why not.
var shared *testBroker

// noBroker is why the broker tests are skipped ("" when they run).
var noBroker string

// brokerSwitch is the environment variable that decides whether the broker tests run. Unset,
// they start brokers of this checkout with `deno` when both are there and are skipped with a
// message otherwise; "require" makes a missing broker a failure (the project's suite sets it);
// "off" skips them even where they could run.
const brokerSwitch = "FERRY_TEST_BROKER"

// whyNoBroker is why this machine cannot start a broker of this checkout, or "".
func whyNoBroker() string {
	switch os.Getenv(brokerSwitch) {
	case "off":
		return brokerSwitch + "=off"
	case "", "require":
	default:
		return fmt.Sprintf("%s=%q is neither require nor off", brokerSwitch, os.Getenv(brokerSwitch))
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "deno.json")); err != nil {
		return "this module is not in a Ferry checkout (no ../../deno.json)"
	}
	// tools/start.sh runs `npx -y deno@2.9.6` where there is no deno (the README's npx route).
	if _, err := exec.LookPath("deno"); err != nil {
		if _, err := exec.LookPath("npx"); err != nil {
			return "neither deno nor npx on PATH (Deno 2.9 runs the broker: https://deno.com)"
		}
	}
	return ""
}

// needBroker skips t when no broker can run here.
func needBroker(t testing.TB) {
	t.Helper()
	if noBroker != "" {
		t.Skipf("needs a broker: %s; set %s=require to fail instead", noBroker, brokerSwitch)
	}
}

// sharedURL is the shared broker's URL; t is skipped when there is none.
func sharedURL(t testing.TB) string {
	t.Helper()
	needBroker(t)
	return shared.URL
}

func TestMain(m *testing.M) {
	flag.Parse()
	noBroker = whyNoBroker()
	if noBroker != "" && os.Getenv(brokerSwitch) == "require" {
		fmt.Fprintf(os.Stderr, "%s=require, but no broker can run: %s\n", brokerSwitch, noBroker)
		os.Exit(1)
	}
	if noBroker != "" {
		fmt.Fprintf(os.Stderr, "ferry: the tests that need a broker are skipped: %s\n", noBroker)
		skipTests(brokerExamples)
		os.Exit(checkLeaks(m.Run()))
	}
	dir, err := os.MkdirTemp("", "ferry-go-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The webhook tests' receivers (httptest) listen on loopback, which brokers refuse unless
	// BROKER_WEBHOOK_ALLOW names it.
	b, err := startBroker(dir, []string{"BROKER_WEBHOOK_ALLOW=127.0.0.0/8,::1"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start the broker:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	shared = b
	os.Setenv("FERRY_URL", b.URL) // the Examples reach the shared broker through it
	code := m.Run()
	b.stop()
	os.RemoveAll(dir)
	os.Exit(checkLeaks(code))
}

// skipTests adds names (tests or examples, which cannot call t.Skip) to -test.skip.
func skipTests(names []string) {
	re := "^(" + strings.Join(names, "|") + ")$"
	if old := flag.Lookup("test.skip").Value.String(); old != "" {
		re = old + "|" + re
	}
	flag.Set("test.skip", re)
}

// checkLeaks is code, or 1 when goroutines of this package outlive the tests. The idle
// keep-alive connections of the many clients the tests make are not leaks.
func checkLeaks(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	); err != nil {
		fmt.Fprintln(os.Stderr, "goroutines left after the tests:", err)
		return 1
	}
	return 0
}

// testBroker is the broker of this checkout as a real process, run as `deno task start` runs it.
type testBroker struct {
	URL     string
	Port    int
	DataDir string
	env     []string
	cmd     *exec.Cmd
	done    chan struct{}
	stderr  *strings.Builder
}

// startCommand is deno.json's start task after its install step: `sh tools/start.sh deno run …`,
// with its leading VAR=value words as environment. start.sh execs Deno, so the pid is the broker's.
func startCommand() (env []string, args []string, err error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deno.json"))
	if err != nil {
		return nil, nil, err
	}
	var cfg struct{ Tasks map[string]string }
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, nil, err
	}
	task := cfg.Tasks["start"]
	if i := strings.LastIndex(task, "&& "); i >= 0 {
		task = task[i+3:]
	}
	for _, w := range strings.Fields(task) {
		if len(args) == 0 && strings.Contains(w, "=") && !strings.HasPrefix(w, "-") {
			env = append(env, w)
			continue
		}
		args = append(args, w)
	}
	if len(args) == 0 {
		return nil, nil, fmt.Errorf("deno.json has no start task")
	}
	return env, args, nil
}

// startBroker starts a broker on a free port over dataDir with extra environment (BROKER_*=…),
// and waits until it listens.
func startBroker(dataDir string, extra []string) (*testBroker, error) {
	return startBrokerOn(dataDir, 0, extra)
}

func startBrokerOn(dataDir string, port int, extra []string) (*testBroker, error) {
	taskEnv, args, err := startCommand()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = repoRoot
	cmd.Env = append(append(append(os.Environ(), taskEnv...),
		fmt.Sprintf("PORT=%d", port), "BROKER_DATA_DIR="+dataDir, "NO_COLOR=1"), extra...)
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &testBroker{DataDir: dataDir, env: extra, cmd: cmd, done: make(chan struct{}), stderr: &strings.Builder{}}
	listening := make(chan int, 1)
	go func() {
		defer close(b.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			if b.stderr.Len() < 64*1024 {
				b.stderr.WriteString(line + "\n")
			}
			var l struct {
				Msg  string `json:"msg"`
				Port int    `json:"port"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" {
				listening <- l.Port
			}
		}
		cmd.Wait()
	}()
	select {
	case p := <-listening:
		b.Port = p
		b.URL = fmt.Sprintf("http://127.0.0.1:%d", p)
		return b, nil
	case <-b.done:
		return nil, fmt.Errorf("the broker exited before listening:\n%s", b.stderr.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-b.done
		return nil, fmt.Errorf("the broker did not listen within 30 s:\n%s", b.stderr.String())
	}
}

// stop sends SIGTERM and waits for the broker to exit (SIGKILL after 15 s).
func (b *testBroker) stop() {
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(15 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
}

// restart stops the broker and starts it again on the same port and data dir.
func (b *testBroker) restart(t testing.TB) {
	t.Helper()
	b.stop()
	nb, err := startBrokerOn(b.DataDir, b.Port, b.env)
	if err != nil {
		t.Fatal(err)
	}
	*b = *nb
}

// ownBroker starts a broker of the test's own (its own data dir), stopped when the test ends.
func ownBroker(t testing.TB, extra ...string) *testBroker {
	t.Helper()
	needBroker(t)
	b, err := startBroker(t.TempDir(), extra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.stop)
	return b
}

// topicName is a topic no other test uses.
func topicName(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(t.Name())
	if len(name) > 150 {
		name = name[:150]
	}
	return fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1_000_000)
}

func TestBrokerHarnessStarts(t *testing.T) {
	needBroker(t)
	if shared.URL == "" || shared.Port == 0 {
		t.Fatal("the shared broker has no URL")
	}
}
