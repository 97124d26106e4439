//! Resource limits: [`ResourceLimiter`], [`StoreLimits`].

use anyhow::{Result, bail};

/// Value returned by [`ResourceLimiter::instances`] default method
pub const DEFAULT_INSTANCE_LIMIT: usize = 10000;
/// Value returned by [`ResourceLimiter::tables`] default method
pub const DEFAULT_TABLE_LIMIT: usize = 10000;
/// Value returned by [`ResourceLimiter::memories`] default method
pub const DEFAULT_MEMORY_LIMIT: usize = 10000;

/// Used by hosts to limit resource consumption of instances.
///
/// An instance of a type implementing this trait is installed in a store
/// with [`Store::limiter`](crate::Store::limiter). It is asked before a
/// linear memory or table is created or grown, and bounds the number of
/// instances, memories and tables in the store.
///
/// This trait only limits resources allocated by WebAssembly instances and
/// by the embedder through this crate's API (memories, tables); the
/// runtime's own bookkeeping is not counted.
pub trait ResourceLimiter: Send {
    /// Notifies the resource limiter that a linear memory has been
    /// requested to grow (or to be created, with `current == 0`).
    ///
    /// * `current` is the current size of the linear memory in bytes.
    /// * `desired` is the desired size of the linear memory in bytes.
    /// * `maximum` is the linear memory's maximum in bytes, if any.
    ///
    /// ## Return Value
    ///
    /// `Ok(true)` allows the growth (which can still fail past `maximum`).
    /// `Ok(false)` makes `memory.grow` return -1, and
    /// [`Memory::new`](crate::Memory::new), [`Memory::grow`](crate::Memory::grow)
    /// or instantiation fail. An `Err` fails instantiation and the host
    /// APIs with that error; for the `memory.grow` instruction it is treated
    /// like `Ok(false)` (in this runtime `memory.grow` never traps).
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> Result<bool>;

    /// Notifies the resource limiter that growing a linear memory, permitted
    /// by [`ResourceLimiter::memory_growing`], has failed.
    ///
    /// The default implementation ignores the failure.
    fn memory_grow_failed(&mut self, error: crate::Error) -> Result<()> {
        let _ = error;
        Ok(())
    }

    /// Notifies the resource limiter that a table has been requested to
    /// grow (or to be created, with `current == 0`).
    ///
    /// * `current` is the current number of elements in the table.
    /// * `desired` is the desired number of elements in the table.
    /// * `maximum` is the table's maximum, if any.
    ///
    /// See [`ResourceLimiter::memory_growing`] for the return value.
    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> Result<bool>;

    /// Notifies the resource limiter that growing a table, permitted by
    /// [`ResourceLimiter::table_growing`], has failed.
    ///
    /// The default implementation ignores the failure.
    fn table_grow_failed(&mut self, error: crate::Error) -> Result<()> {
        let _ = error;
        Ok(())
    }

    /// The maximum number of instances that can be created for a `Store`.
    ///
    /// Module instantiation will fail if this limit is exceeded. Defaults to
    /// 10,000.
    fn instances(&self) -> usize {
        DEFAULT_INSTANCE_LIMIT
    }

    /// The maximum number of tables that can be created for a `Store`.
    ///
    /// Creation of tables will fail if this limit is exceeded. Defaults to
    /// 10,000.
    fn tables(&self) -> usize {
        DEFAULT_TABLE_LIMIT
    }

    /// The maximum number of linear memories that can be created for a
    /// `Store`.
    ///
    /// Creation of memories will fail with an error if this limit is
    /// exceeded. Defaults to 10,000.
    fn memories(&self) -> usize {
        DEFAULT_MEMORY_LIMIT
    }
}

/// Used to build [`StoreLimits`].
pub struct StoreLimitsBuilder(StoreLimits);

impl StoreLimitsBuilder {
    /// Creates a new [`StoreLimitsBuilder`]: no size limits, and the
    /// default counts of instances, memories and tables.
    pub fn new() -> Self {
        Self(StoreLimits::default())
    }

    /// The maximum number of bytes a linear memory can grow to.
    pub fn memory_size(mut self, limit: usize) -> Self {
        self.0.memory_size = Some(limit);
        self
    }

    /// The maximum number of elements in a table.
    pub fn table_elements(mut self, limit: usize) -> Self {
        self.0.table_elements = Some(limit);
        self
    }

    /// The maximum number of instances that can be created for a
    /// [`Store`](crate::Store).
    pub fn instances(mut self, limit: usize) -> Self {
        self.0.instances = limit;
        self
    }

    /// The maximum number of tables that can be created for a
    /// [`Store`](crate::Store).
    pub fn tables(mut self, tables: usize) -> Self {
        self.0.tables = tables;
        self
    }

    /// The maximum number of memories that can be created for a
    /// [`Store`](crate::Store).
    pub fn memories(mut self, memories: usize) -> Self {
        self.0.memories = memories;
        self
    }

    /// Indicates that a denied or failed growth is an error instead of a
    /// failure value (for host APIs; see
    /// [`ResourceLimiter::memory_growing`] for `memory.grow`).
    pub fn trap_on_grow_failure(mut self, trap: bool) -> Self {
        self.0.trap_on_grow_failure = trap;
        self
    }

    /// Consumes this builder and returns the [`StoreLimits`].
    pub fn build(self) -> StoreLimits {
        self.0
    }
}

impl Default for StoreLimitsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// Provides limits for a [`Store`](crate::Store).
///
/// This is a convenience type included to avoid needing to implement the
/// [`ResourceLimiter`] trait if your use case fits in the static
/// configuration that this [`StoreLimits`] provides.
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
