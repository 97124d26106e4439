;; SIMD kernel: a saxpy-and-dot loop over two f32 arrays of 64 Ki elements
;; with f32x4 operations, repeated $n times. Returns the bits of the final
;; dot product's lanes summed (deterministic: same operation order in both
;; engines).
(module
  (memory 8)
  (func (export "run") (param $n i32) (result i64)
    (local $i i32) (local $round i32) (local $acc v128)
    (local.set $i (i32.const 0))
    (loop $init
      (f32.store (local.get $i) (f32.convert_i32_u (i32.and (local.get $i) (i32.const 255))))
      (f32.store offset=0x40000 (local.get $i) (f32.const 0.5))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br_if $init (i32.lt_u (local.get $i) (i32.const 0x40000))))
    (loop $rounds
      (local.set $acc (v128.const f32x4 0 0 0 0))
      (local.set $i (i32.const 0))
      (loop $vec
        ;; y = a * x + y
        (v128.store offset=0x40000 (local.get $i)
          (f32x4.add
            (f32x4.mul (v128.load (local.get $i)) (v128.const f32x4 0.001 0.001 0.001 0.001))
            (v128.load offset=0x40000 (local.get $i))))
        (local.set $acc
          (f32x4.add (local.get $acc)
            (f32x4.mul (v128.load (local.get $i)) (v128.load offset=0x40000 (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br_if $vec (i32.lt_u (local.get $i) (i32.const 0x40000))))
      (local.set $round (i32.add (local.get $round) (i32.const 1)))
      (br_if $rounds (i32.lt_u (local.get $round) (local.get $n))))
    (i64.extend_i32_u
      (i32.reinterpret_f32
        (f32.add
          (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc)))
          (f32.add (f32x4.extract_lane 2 (local.get $acc)) (f32x4.extract_lane 3 (local.get $acc))))))))
