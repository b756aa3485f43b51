package main

import (
	"strings"
	"testing"
)

// The effective configuration is logged at start, before the journal is
// opened: a journal URL whose password holds a raw '/', '?' or '#' (which
// url.Parse refuses) must not show it either.
func TestEffectiveConfig_HidesAJournalPasswordWithASlash(t *testing.T) {
	const secret = "s3cr/et"
	m := NewMain()
	err := m.ParseFlags([]string{"--cluster", "etcd://127.0.0.1:2379", "--provider", "wechatpay",
		"--journal", "postgres://refundd:" + secret + "@db.internal:5432/refundd"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.effective {
		if strings.Contains(s.Value, secret) {
			t.Fatalf("effective configuration shows %s = %q: the password is logged", s.Name, s.Value)
		}
	}
}
