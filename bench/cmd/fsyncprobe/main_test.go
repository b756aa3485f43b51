package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRun_PrintsARowPerCase(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--dir", t.TempDir(), "--size-mb", "1", "--pages", "3",
		"--scattered", "0, 3", "--commits", "3", "--rounds", "1"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1 | 0 of 3 |", "| 1 | 3 of 3 |", "3 pages of 4 KiB per commit"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRun_RefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scattered", "1,x"},
		{"--pages", "2", "--scattered", "3"},
		{"--no-such-flag"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"--dir", t.TempDir(), "--size-mb", "1"}, args...), &out); err == nil {
			t.Errorf("run %v succeeded", args)
		}
	}
}
