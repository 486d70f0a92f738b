package badger_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

func ExampleOpen() {
	ctx := context.Background()
	dir, cleanup := exampleDir()
	defer cleanup()

	l, err := badger.Open(dir, badger.Options{})
	if err != nil {
		panic(err)
	}
	if err := l.Create(ctx, "s1"); err != nil {
		panic(err)
	}
	if _, err := l.Append(ctx, "s1", 0, store.Event{Type: "session/created"}); err != nil {
		panic(err)
	}
	// Make the append durable before telling anyone outside the process.
	if err := l.Sync(ctx); err != nil {
		panic(err)
	}

	// The directory is held until Close.
	_, err = badger.Open(dir, badger.Options{})
	fmt.Println("second open locked:", errors.Is(err, store.ErrLocked))

	l.Close()
	l, err = badger.Open(dir, badger.Options{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	head, _ := l.Head(ctx, "s1")
	fmt.Println("head after reopen:", head)
	// Output:
	// second open locked: true
	// head after reopen: 1
}
