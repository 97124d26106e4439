;; The `bench` module Sightglass benchmarks import: `start` and `end` mark
;; the measured region. For the output checks in tests/sightglass.rs they
;; do nothing.
(module
  (func (export "start"))
  (func (export "end")))
