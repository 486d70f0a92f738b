package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wagent/wagent/store"
)

func ExampleNewMemory() {
	ctx := context.Background()
	l := store.NewMemory()
	defer l.Close()

	if err := l.Create(ctx, "s1"); err != nil {
		panic(err)
	}
	head, err := l.Append(ctx, "s1", 0,
		store.Event{Type: "turn/start", Turn: 1, Data: json.RawMessage(`{"turn":1}`)},
		store.Event{Type: "user/message", Turn: 1, Data: json.RawMessage(`{"content":"hello"}`)},
	)
	if err != nil {
		panic(err)
	}
	fmt.Println("head:", head)

	// A writer that still thinks the head is 0 loses.
	_, err = l.Append(ctx, "s1", 0, store.Event{Type: "turn/start", Turn: 1})
	fmt.Println("stale writer conflicts:", errors.Is(err, store.ErrConflict))

	events, err := l.Read(ctx, "s1", 1, 0)
	if err != nil {
		panic(err)
	}
	for _, e := range events {
		fmt.Println(e.Seq, e.Type, string(e.Data))
	}
	// Output:
	// head: 2
	// stale writer conflicts: true
	// 1 turn/start {"turn":1}
	// 2 user/message {"content":"hello"}
}

func ExampleLog_Watch() {
	ctx := context.Background()
	l := store.NewMemory()
	defer l.Close()
	_ = l.Create(ctx, "s1")

	heads, stop := l.Watch("s1")
	defer stop()
	for i := range 3 {
		_, _ = l.Append(ctx, "s1", uint64(i), store.Event{Type: "op/note"})
	}
	// Three appends, one notification: a slow reader sees the latest head.
	fmt.Println("head:", <-heads)
	// Output:
	// head: 3
}
