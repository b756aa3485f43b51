package client

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// document reads the server's OpenAPI document, the one GET
// /v1/openapi.json serves (embedded from api/openapi.json).
func document(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// Every operation of the document is a method of Client (or is listed as
// not for clients, with its reason), and the table names no operation the
// document lacks.
func TestOperationsCovered(t *testing.T) {
	doc := document(t)
	ct := reflect.TypeOf(&Client{})
	seen := map[string]bool{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			id, _ := op.(map[string]any)["operationId"].(string)
			if id == "" {
				t.Errorf("%s %s has no operationId", method, path)
				continue
			}
			seen[id] = true
			name, ok := operations[id]
			_, skipped := notForClients[id]
			switch {
			case ok && skipped:
				t.Errorf("%s is both a method (%s) and not for clients", id, name)
			case !ok && !skipped:
				t.Errorf("operation %s (%s %s) has no method in client.operations", id, method, path)
			case ok:
				if _, found := ct.MethodByName(name); !found {
					t.Errorf("operation %s: client.operations names %s, which *Client does not have", id, name)
				}
			}
		}
	}
	for id := range operations {
		if !seen[id] {
			t.Errorf("client.operations names %s, which the document does not have", id)
		}
	}
	for id := range notForClients {
		if !seen[id] {
			t.Errorf("notForClients names %s, which the document does not have", id)
		}
	}
}

func enum(t *testing.T, doc map[string]any, schema string) []string {
	t.Helper()
	s, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)[schema].(map[string]any)
	var out []string
	for _, v := range s["enum"].([]any) {
		out = append(out, v.(string))
	}
	sort.Strings(out)
	return out
}

// The codes are the document's ErrorCode enum (which api's tests keep
// equal to the codes the server maps to a status).
func TestCodesMatchTheDocument(t *testing.T) {
	var have []string
	for _, c := range codes {
		have = append(have, string(c))
	}
	sort.Strings(have)
	if want := enum(t, document(t), "ErrorCode"); !slices.Equal(have, want) {
		t.Fatalf("client codes %v\ndocument      %v", have, want)
	}
}

func TestStatesMatchTheDocument(t *testing.T) {
	have := slices.Clone(states)
	sort.Strings(have)
	if want := enum(t, document(t), "RefundState"); !slices.Equal(have, want) {
		t.Fatalf("client states %v\ndocument       %v", have, want)
	}
}
