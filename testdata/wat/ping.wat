;; ping: a wagent operation written by hand in WAT, with no guest kit.
;; It answers the command /ping with "pong", and shows the whole ABI a
;; guest needs: the marker export, a hook handler, reading the view into a
;; buffer of its own choosing (asking again when it does not fit), a note
;; read that finds nothing, a log line, and one effects call.
;;
;; Build: wat2wasm ping.wat -o ping.wasm, then embed ping.manifest.json
;; (see testdata/hostile/build.sh).
(module
  (import "wagent" "view" (func $view (param i32 i32) (result i32)))
  (import "wagent" "note" (func $note (param i32 i32 i32 i32) (result i32)))
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (import "wagent" "log" (func $log (param i32 i32 i32) (result i32)))

  (memory (export "memory") 1)

  ;; Static data: the note key, a log line and the answer.
  (data (i32.const 16) "pings")                              ;; 5 bytes
  (data (i32.const 32) "ping: view does not fit")            ;; 23 bytes
  (data (i32.const 64) "[{\"kind\":\"reply\",\"text\":\"pong\"}]") ;; 32 bytes

  ;; The view buffer: 1024..65536.
  (global $buf i32 (i32.const 1024))
  (global $cap i32 (i32.const 64512))

  (func (export "wagent_abi_v1"))

  ;; wagent_on_command(view_len) -> status
  (func (export "wagent_on_command") (param $view_len i32) (result i32)
    ;; Read the view; the host returns the length it needs.
    (if (i32.gt_u
          (call $view (global.get $buf) (global.get $cap))
          (global.get $cap))
      (then
        (drop (call $log (i32.const 3) (i32.const 32) (i32.const 23)))
        (return (i32.const 1))))
    ;; A note nobody wrote: the host answers -1 and copies nothing.
    (drop (call $note (i32.const 16) (i32.const 5) (global.get $buf) (i32.const 16)))
    (drop (call $effects (i32.const 64) (i32.const 32)))
    (i32.const 0))
)
