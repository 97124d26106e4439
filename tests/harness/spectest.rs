//! The `spectest` module that core modules of the spec testsuite import,
//! written once for every engine crate with upstream Wasmtime's API shape.

/// Expands to `define_spectest(linker, store)` over the engine crate `$w`
/// (`wasmtime` or `upstream_wasmtime`), which defines the `spectest`
/// module in `linker` with its items living in `store`.
macro_rules! spectest {
    ($w:ident) => {
        /// Defines the `spectest` module that the files' core modules
        /// import.
        fn define_spectest(
            linker: &mut $w::Linker<()>,
            store: &mut $w::Store<()>,
        ) -> $w::Result<()> {
            // The print functions only have to exist with the right types;
            // their output is not checked, and would interleave across
            // worker threads.
            linker.func_wrap("spectest", "print", || {})?;
            linker.func_wrap("spectest", "print_i32", |_: i32| {})?;
            linker.func_wrap("spectest", "print_i64", |_: i64| {})?;
            linker.func_wrap("spectest", "print_f32", |_: f32| {})?;
            linker.func_wrap("spectest", "print_f64", |_: f64| {})?;
            linker.func_wrap("spectest", "print_i32_f32", |_: i32, _: f32| {})?;
            linker.func_wrap("spectest", "print_f64_f64", |_: f64, _: f64| {})?;
            let globals = [
                ("global_i32", $w::ValType::I32, $w::Val::I32(666)),
                ("global_i64", $w::ValType::I64, $w::Val::I64(666)),
                (
                    "global_f32",
                    $w::ValType::F32,
                    $w::Val::F32(666.6f32.to_bits()),
                ),
                (
                    "global_f64",
                    $w::ValType::F64,
                    $w::Val::F64(666.6f64.to_bits()),
                ),
            ];
            for (name, ty, value) in globals {
                let ty = $w::GlobalType::new(ty, $w::Mutability::Const);
                let global = $w::Global::new(&mut *store, ty, value)?;
                linker.define(&*store, "spectest", name, global)?;
            }
            let table = $w::Table::new(
                &mut *store,
                $w::TableType::new($w::RefType::FUNCREF, 10, Some(20)),
                $w::Ref::Func(None),
            )?;
            linker.define(&*store, "spectest", "table", table)?;
            let memory = $w::Memory::new(&mut *store, $w::MemoryType::new(1, Some(2)))?;
            linker.define(&*store, "spectest", "memory", memory)?;
            Ok(())
        }
    };
}

pub(crate) use spectest;
