;; Answers call "c2", which another op owns (invalid-effect; the view says
;; who owns what, so the host can refuse it before the engine sees it).
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "[{\"kind\":\"result\",\"call_id\":\"c2\",\"content\":\"42\"}]") ;; 49 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $effects (i32.const 0) (i32.const 49)))
    (i32.const 0)))
