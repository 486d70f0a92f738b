;; Asks for a retry after 2^63-1 ms, which the engine's "event time plus
;; delay" would overflow into an immediate retry: refused (invalid-effect),
;; delays are bounded to a day.
(module
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "[{\"kind\":\"retry\",\"delay_ms\":9223372036854775807}]") ;; 49 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_request_error") (param i32) (result i32)
    (drop (call $effects (i32.const 0) (i32.const 49)))
    (i32.const 0)))
