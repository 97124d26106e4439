//! The engine-wide registry of function types.
//!
//! Every function type used by a module or a host function is interned
//! here into a [`VMSharedTypeIndex`]; two functions have the same index
//! exactly when their types are equal, which is what `call_indirect`'s
//! signature check and import type checks compare.
//!
//! Entries are never freed: the registry grows with the number of distinct
//! function types an engine ever sees, which is small in practice.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use wasmtime_environ::{VMSharedTypeIndex, WasmFuncType};

/// Interns function types engine-wide.
#[derive(Debug, Default)]
pub struct TypeRegistry {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<Arc<WasmFuncType>, VMSharedTypeIndex>,
    types: Vec<Arc<WasmFuncType>>,
}

impl TypeRegistry {
    /// The id of `ty`, registering it if new.
    pub fn register(&self, ty: &WasmFuncType) -> VMSharedTypeIndex {
        if let Some(index) = self
            .inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .get(ty)
        {
            return *index;
        }
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = inner.map.get(ty) {
            return *index;
        }
        let ty = Arc::new(ty.clone());
        let index = VMSharedTypeIndex(
            u32::try_from(inner.types.len())
                .ok()
                .filter(|i| *i != VMSharedTypeIndex::RESERVED.0)
                .expect("too many function types in one engine"),
        );
        inner.types.push(ty.clone());
        inner.map.insert(ty, index);
        index
    }

    /// The type with id `index`.
    pub fn get(&self, index: VMSharedTypeIndex) -> Option<Arc<WasmFuncType>> {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .types
            .get(index.0 as usize)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_environ::WasmValType;

    #[test]
    fn interning() {
        let r = TypeRegistry::default();
        let a = WasmFuncType {
            params: Box::new([WasmValType::I32]),
            results: Box::new([]),
        };
        let b = WasmFuncType {
            params: Box::new([]),
            results: Box::new([WasmValType::I32]),
        };
        let ia = r.register(&a);
        let ib = r.register(&b);
        assert_ne!(ia, ib);
        assert_eq!(r.register(&a.clone()), ia);
        assert_eq!(*r.get(ib).unwrap(), b);
    }
}
