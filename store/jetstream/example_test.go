package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
)

// Two writers share a session through JetStream: the one whose expected
// head is stale is refused and reads before it tries again. The server is
// embedded here; a deployment connects to its own (see OpenURL).
func Example() {
	dir, err := os.MkdirTemp("", "wagent-jetstream-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir,
		MaxPayload: 8 << 20, // the default 1 MiB cannot carry a 4 MiB append
		NoLog:      true, NoSigs: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Println("nats-server did not start")
		return
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	ctx := context.Background()
	logs, err := jetstream.Open(ctx, nc, jetstream.Options{}) // stream WAGENT_LOG, subjects wagent.log.*
	if err != nil {
		fmt.Println(err)
		return
	}
	defer logs.Close()

	msg := func(text string) store.Event {
		data, _ := json.Marshal(map[string]string{"content": text})
		return store.Event{Type: "user/message", Turn: 1, Time: time.Now(), Data: data}
	}
	if err := logs.Create(ctx, "demo:1"); err != nil {
		fmt.Println(err)
		return
	}
	head, err := logs.Append(ctx, "demo:1", 0, msg("hello"), msg("are you there?"))
	fmt.Println("head", head, err)

	// A second writer still thinks the session is empty.
	_, err = logs.Append(ctx, "demo:1", 0, msg("me first"))
	fmt.Println("stale writer refused:", errors.Is(err, store.ErrConflict))
	head, _ = logs.Head(ctx, "demo:1")
	head, err = logs.Append(ctx, "demo:1", head, msg("me next"))
	fmt.Println("head", head, err)

	events, err := logs.Read(ctx, "demo:1", 2, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range events {
		fmt.Printf("%d %s %s\n", e.Seq, e.Type, e.Data)
	}
	ids, _ := logs.Sessions(ctx)
	fmt.Println(ids)
	// Output:
	// head 2 <nil>
	// stale writer refused: true
	// head 3 <nil>
	// 2 user/message {"content":"are you there?"}
	// 3 user/message {"content":"me next"}
	// [demo:1]
}
