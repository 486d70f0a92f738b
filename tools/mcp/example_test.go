package mcp_test

import (
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wagent/wagent/tools/mcp"
)

// What the model and the guards are offered for a server's tools: names
// joined with the server's, MCP's defaults filled in for a tool that
// states no annotations.
func ExampleSpecs() {
	specs, _ := mcp.Specs("files", []*sdk.Tool{
		{Name: "read_text_file", Description: "Read a file.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "move_file", Description: "Move a file."},
	})
	for _, s := range specs {
		a := s.Annotations
		fmt.Printf("%s server=%s read-only=%v destructive=%v open-world=%v\n", s.Name, s.Server, a.ReadOnly, a.Destructive, a.OpenWorld)
	}
	// Output:
	// files__read_text_file server=files read-only=true destructive=false open-world=true
	// files__move_file server=files read-only=false destructive=true open-world=true
}

// Long results are cut, saying how much.
func ExampleCut() {
	fmt.Println(mcp.Cut("0123456789", 100))
	fmt.Println(len(mcp.Cut(string(make([]byte, 5000)), 200)) <= 200)
	// Output:
	// 0123456789
	// true
}
