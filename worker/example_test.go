package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
	"github.com/wagent/wagent/worker"
)

// A worker drives a session someone else created and woke: here in one
// program, in production in another process or on another machine.
func Example() {
	dir, _ := os.MkdirTemp("", "worker-example-")
	defer os.RemoveAll(dir)
	ns, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, MaxPayload: 8 << 20, NoLog: true, NoSigs: true})
	go ns.Start()
	ns.ReadyForConnections(10 * time.Second)
	defer ns.Shutdown()
	ctx := context.Background()
	nc, _ := nats.Connect(ns.ClientURL())
	defer nc.Close()
	log, _ := jetstream.Open(ctx, nc, jetstream.Options{})
	bus, _ := worker.OpenBus(ctx, nc, worker.BusOptions{})

	// The client: create a session, queue a prompt, wake it.
	engine.Create(ctx, log, "hello", event.SessionCreated{}, time.Now())
	m, _ := engine.Open(ctx, engine.Config{Log: log, Session: "hello", Passive: true})
	m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "hi"})
	bus.Wake(ctx, "hello")

	// The worker: it runs sessions with this config (a real one resolves
	// each session's own from its settings).
	done := make(chan struct{})
	w, _ := worker.New(worker.Options{Log: log, Bus: bus, Name: "w1",
		Base: engine.Config{Provider: &et.Scripted{Answer: et.Echo}},
		Observe: func(e worker.Event) {
			if e.Kind == worker.EventDrove {
				close(done)
			}
		}})
	wctx, stop := context.WithCancel(ctx)
	go w.Run(wctx)
	<-done
	stop()

	evs, _ := log.Read(ctx, "hello", 1, 0)
	spans, _ := worker.CheckWriters(evs)
	fmt.Println("written by", spans[0].Worker)
	fmt.Println(answer(evs))
	// Output:
	// written by w1
	// echo: hi
}

func answer(evs []store.Event) string {
	for _, e := range evs {
		if e.Type == event.EvAssistantMessage {
			var a event.AssistantMessage
			json.Unmarshal(e.Data, &a)
			return a.Content
		}
	}
	return ""
}
