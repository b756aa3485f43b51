package sandbox

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StartLocal generates keys the first time and keeps them, with the books,
// in its directory: a restart serves the same merchant and knows its orders.
func TestStartLocal_KeepsKeysAndBooks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sandbox")
	start := func() *Local {
		t.Helper()
		l, err := StartLocal(dir, testMchID, func(c *Config) { c.ProcessingDelay = time.Hour })
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := start()
	if err := first.CreateOrder("T1", "", 100); err != nil {
		t.Fatal(err)
	}
	first.Close()
	second := start()
	defer second.Close()
	if second.Keys.MchID != testMchID || second.Keys.MerchantSerial != first.Keys.MerchantSerial {
		t.Errorf("restart: mchid %s serial %s; want %s %s (the keys written first)",
			second.Keys.MchID, second.Keys.MerchantSerial, testMchID, first.Keys.MerchantSerial)
	}
	res, err := http.Get(second.URL + "/sandbox/orders/T1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET order T1 after a restart: %s; want 200 (books kept in state.json)", res.Status)
	}
}

func TestStartLocal_BadKeyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := StartLocal(dir, testMchID, nil)
	if err == nil {
		l.Close()
		t.Fatal("StartLocal over a corrupt manifest succeeded")
	}
	if !errors.Is(err, ErrKeyFiles) || !strings.Contains(err.Error(), dir) {
		t.Errorf("StartLocal: %v; want ErrKeyFiles naming %s", err, dir)
	}
}
