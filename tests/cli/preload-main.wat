;; Uses the preloaded `lib` module.
(module
  (import "lib" "triple" (func $triple (param i32) (result i32)))
  (func (export "run") (param i32) (result i32) (call $triple (local.get 0))))
