//! Resource limits: [`ResourceLimiter`], [`StoreLimits`].

use anyhow::{Result, bail};

/// How many instances a store may hold when its limiter does not say
/// otherwise (the default of [`ResourceLimiter::instances`], and the
/// bound of a store without a limiter).
pub const DEFAULT_INSTANCE_LIMIT: usize = 10000;
/// How many tables a store may hold when its limiter does not say otherwise
/// (the default of [`ResourceLimiter::tables`], and the bound of a store
/// without a limiter).
pub const DEFAULT_TABLE_LIMIT: usize = 10000;
/// How many linear memories a store may hold when its limiter does not say
/// otherwise (the default of [`ResourceLimiter::memories`], and the bound
/// of a store without a limiter).
pub const DEFAULT_MEMORY_LIMIT: usize = 10000;

/// The embedder's say over what a store allocates: the sizes of its linear
/// memories and tables, and how many instances, memories and tables it
/// holds.
///
/// Install one with [`Store::limiter`](crate::Store::limiter). The store
/// then asks it before it creates or grows a memory or a table, whether
/// for an instantiation, a host API ([`Memory::new`](crate::Memory::new),
/// [`Table::grow`](crate::Table::grow), ...) or a `memory.grow` or
/// `table.grow` instruction, and reads its counts once, at installation.
/// [`StoreLimits`] covers the common case of fixed limits.
///
/// Only memories and tables are limited. The runtime's own allocations
/// (instance records, compiled code, fiber stacks) are not reported here.
pub trait ResourceLimiter: Send {
    /// Decides whether a linear memory may grow from `current` to `desired`
    /// bytes; creating a memory asks with `current == 0`.
    ///
    /// `maximum` is the memory's declared maximum in bytes, if it has one.
    /// Neither the request nor the answer is checked against it first: a
    /// limiter that allows growth past `maximum` still sees it fail.
    ///
    /// ## Return Value
    ///
    /// * `Ok(true)`: go ahead.
    /// * `Ok(false)`: refuse. The `memory.grow` instruction returns -1;
    ///   [`Memory::new`](crate::Memory::new),
    ///   [`Memory::grow`](crate::Memory::grow) and instantiation fail with
    ///   an error.
    /// * `Err(e)`: fail with `e`. A host API or instantiation returns it; a
    ///   `memory.grow` instruction stops the call, which then fails with
    ///   `e` (and a [`WasmBacktrace`](crate::WasmBacktrace) pointing at the
    ///   growing function).
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> Result<bool>;

    /// Hears of a memory growth that [`ResourceLimiter::memory_growing`]
    /// allowed but that then failed (for example past the memory's
    /// maximum); `error` describes the failure.
    ///
    /// Returning `Ok(())` keeps the failure an ordinary one (`memory.grow`
    /// returns -1, [`Memory::grow`](crate::Memory::grow) returns an error);
    /// returning an error fails the operation with it, as an `Err` from
    /// `memory_growing` would. The default returns `Ok(())`.
    fn memory_grow_failed(&mut self, error: crate::Error) -> Result<()> {
        let _ = error;
        Ok(())
    }

    /// Decides whether a table may grow from `current` to `desired`
    /// elements; creating a table asks with `current == 0`.
    ///
    /// `maximum` is the table's declared maximum, if any. The answers mean
    /// what they mean for [`ResourceLimiter::memory_growing`], with
    /// `table.grow`, [`Table::new`](crate::Table::new) and
    /// [`Table::grow`](crate::Table::grow) in place of the memory
    /// operations.
    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> Result<bool>;

    /// Hears of a table growth that [`ResourceLimiter::table_growing`]
    /// allowed but that then failed; as
    /// [`ResourceLimiter::memory_grow_failed`] for memories. The default
    /// returns `Ok(())`.
    fn table_grow_failed(&mut self, error: crate::Error) -> Result<()> {
        let _ = error;
        Ok(())
    }

    /// How many instances the store may hold at once; instantiating one
    /// more fails. The default is [`DEFAULT_INSTANCE_LIMIT`].
    ///
    /// Read once, by [`Store::limiter`](crate::Store::limiter).
    fn instances(&self) -> usize {
        DEFAULT_INSTANCE_LIMIT
    }

    /// How many tables the store may hold; creating one more, directly or
    /// by instantiation, fails. The default is [`DEFAULT_TABLE_LIMIT`].
    ///
    /// Read once, by [`Store::limiter`](crate::Store::limiter).
    fn tables(&self) -> usize {
        DEFAULT_TABLE_LIMIT
    }

    /// How many linear memories the store may hold; creating one more,
    /// directly or by instantiation, fails. The default is
    /// [`DEFAULT_MEMORY_LIMIT`].
    ///
    /// Read once, by [`Store::limiter`](crate::Store::limiter).
    fn memories(&self) -> usize {
        DEFAULT_MEMORY_LIMIT
    }
}

/// Builds a [`StoreLimits`] one limit at a time.
pub struct StoreLimitsBuilder(StoreLimits);

impl StoreLimitsBuilder {
    /// A builder with no size limits and the default counts
    /// ([`DEFAULT_INSTANCE_LIMIT`], [`DEFAULT_MEMORY_LIMIT`],
    /// [`DEFAULT_TABLE_LIMIT`]).
    pub fn new() -> Self {
        Self(StoreLimits::default())
    }

    /// Caps every linear memory of the store at `limit` bytes, for creation
    /// and growth alike.
    pub fn memory_size(mut self, limit: usize) -> Self {
        self.0.memory_size = Some(limit);
        self
    }

    /// Caps every table of the store at `limit` elements, for creation and
    /// growth alike.
    pub fn table_elements(mut self, limit: usize) -> Self {
        self.0.table_elements = Some(limit);
        self
    }

    /// How many instances the store may hold.
    pub fn instances(mut self, limit: usize) -> Self {
        self.0.instances = limit;
        self
    }

    /// How many tables the store may hold.
    pub fn tables(mut self, tables: usize) -> Self {
        self.0.tables = tables;
        self
    }

    /// How many linear memories the store may hold.
    pub fn memories(mut self, memories: usize) -> Self {
        self.0.memories = memories;
        self
    }

    /// With `true`, a growth that the limits refuse, or that fails, is an
    /// error rather than a failure value: the `memory.grow` or `table.grow`
    /// instruction stops its call with that error instead of returning -1
    /// (see [`ResourceLimiter::memory_growing`]). Off by default.
    pub fn trap_on_grow_failure(mut self, trap: bool) -> Self {
        self.0.trap_on_grow_failure = trap;
        self
    }

    /// The limits configured so far.
    pub fn build(self) -> StoreLimits {
        self.0
    }
}

impl Default for StoreLimitsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// A ready-made [`ResourceLimiter`] with fixed limits, built with
/// [`StoreLimitsBuilder`].
///
/// Keep it in the store's data and install it with
/// [`Store::limiter`](crate::Store::limiter) (the example there shows
/// how). Write your own `ResourceLimiter` when the limits must change at
/// run time or depend on more than sizes and counts.
#[derive(Clone, Debug)]
pub struct StoreLimits {
    memory_size: Option<usize>,
    table_elements: Option<usize>,
    instances: usize,
    tables: usize,
    memories: usize,
    trap_on_grow_failure: bool,
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            memory_size: None,
            table_elements: None,
            instances: DEFAULT_INSTANCE_LIMIT,
            tables: DEFAULT_TABLE_LIMIT,
            memories: DEFAULT_MEMORY_LIMIT,
            trap_on_grow_failure: false,
        }
    }
}

impl ResourceLimiter for StoreLimits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> Result<bool> {
        let allow = match self.memory_size {
            Some(limit) if desired > limit => false,
            _ => !matches!(maximum, Some(max) if desired > max),
        };
        if !allow && self.trap_on_grow_failure {
            bail!("forcing trap when growing memory to {desired} bytes")
        }
        Ok(allow)
    }

    fn memory_grow_failed(&mut self, error: crate::Error) -> Result<()> {
        if self.trap_on_grow_failure {
            Err(error.context("forcing a memory growth failure to be a trap"))
        } else {
            Ok(())
        }
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> Result<bool> {
        let allow = match self.table_elements {
            Some(limit) if desired > limit => false,
            _ => !matches!(maximum, Some(max) if desired > max),
        };
        if !allow && self.trap_on_grow_failure {
            bail!("forcing trap when growing table to {desired} elements")
        }
        Ok(allow)
    }

    fn table_grow_failed(&mut self, error: crate::Error) -> Result<()> {
        if self.trap_on_grow_failure {
            Err(error.context("forcing a table growth failure to be a trap"))
        } else {
            Ok(())
        }
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.tables
    }

    fn memories(&self) -> usize {
        self.memories
    }
}
