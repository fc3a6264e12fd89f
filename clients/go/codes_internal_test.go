package ferry

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestCodesMatchTheBrokersCatalog reads the broker's catalog (protocol/error_codes.ts) and its
// statuses (routes/http.ts) from the checkout around the module: one Code per code, each with
// the broker's status.
func TestCodesMatchTheBrokersCatalog(t *testing.T) {
	catalog, err := os.ReadFile("../../protocol/error_codes.ts")
	if err != nil {
		t.Skipf("needs the Ferry checkout around the module: %v", err)
	}
	statuses, err := os.ReadFile("../../routes/http.ts")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`(?s)ERROR_CODES = \[(.*?)\]`).FindSubmatch(catalog)
	if list == nil {
		t.Fatal("no ERROR_CODES list in protocol/error_codes.ts")
	}
	want := map[Code]int{}
	for _, m := range regexp.MustCompile(`"([a-z_]+)"`).FindAllSubmatch(list[1], -1) {
		want[Code(m[1])] = 0
	}
	table := regexp.MustCompile(`(?s)const STATUS: Record<ErrorCode, number> = \{(.*?)\}`).FindSubmatch(statuses)
	if table == nil {
		t.Fatal("no STATUS table in routes/http.ts")
	}
	for _, m := range regexp.MustCompile(`([a-z_]+): (\d{3})`).FindAllSubmatch(table[1], -1) {
		want[Code(m[1])], _ = strconv.Atoi(string(m[2]))
	}
	if len(want) < 20 {
		t.Fatalf("read only %d codes from the catalog", len(want))
	}
	for code, status := range want {
		if got, ok := codeStatus[code]; !ok || got != status {
			t.Errorf("code %q: the client has status %d (known: %v), the broker %d", code, got, ok, status)
		}
	}
	for code := range codeStatus {
		if _, ok := want[code]; !ok {
			t.Errorf("code %q is not in the broker's catalog", code)
		}
	}
}
