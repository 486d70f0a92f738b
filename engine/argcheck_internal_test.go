package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// An op that contributes a new schema every step (an enum of what is
// there now) must not grow the process's cache of compiled schemas
// without bound.
func TestArgSchemaCacheIsBounded(t *testing.T) {
	pad := make([]byte, 64<<10)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := 0; i < 400; i++ {
		params := json.RawMessage(fmt.Sprintf(`{"type":"object","description":%q,"properties":{"n%d":{"type":"string"}}}`, pad, i))
		if err := argumentsError(params, json.RawMessage(fmt.Sprintf(`{"n%d":1}`, i))); err == nil {
			t.Fatalf("schema %d: a number for a string passed", i)
		}
	}
	argSchemas.Lock()
	n, size := len(argSchemas.m), argSchemas.bytes
	argSchemas.Unlock()
	if size > argSchemaBytes || n*(64<<10) > argSchemaBytes {
		t.Fatalf("the cache holds %d schemas, %d bytes; the bound is %d bytes", n, size, argSchemaBytes)
	}
}

// A schema nested thousands deep (an op's, hostile or broken) must not
// hold the step for minutes while it compiles: it is not checked.
func TestDeepSchemaIsNotCompiled(t *testing.T) {
	n := 3000
	params := json.RawMessage(strings.Repeat(`{"items":`, n) + `{"type":"string"}` + strings.Repeat(`}`, n))
	t0 := time.Now()
	argumentsError(params, json.RawMessage(`[1]`))
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("checking against a schema %d deep took %v", n, d)
	}
	if jsonDepth([]byte(`{"a":"{{[[\"{","b":[{}]}`)) != 3 {
		t.Fatal("jsonDepth counts brackets inside strings")
	}
}
