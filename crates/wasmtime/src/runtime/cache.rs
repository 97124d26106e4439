//! On-disk cache of compiled WebAssembly modules.
//!
//! A [`Cache`] owns a directory.  Every compiled module lives in its own file,
//! `<directory>/modules/<key>.cwasm`, where `<key>` is the 64-character
//! lowercase hexadecimal spelling of a 32-byte key.  The key and the entry
//! bytes are produced by the caller (the engine hashes the module bytes and
//! its settings); this module only deals with files: looking them up,
//! writing them atomically and evicting old ones.
//!
//! # Writing entries
//!
//! An entry is first written to a temporary file in the same directory (its
//! name holds the process id and a per-process counter and ends in `.tmp`),
//! then renamed over the final name.  Readers therefore either see a complete
//! old entry, a complete new entry, or nothing, and several threads or
//! processes may store the same key at the same time.
//!
//! # Eviction
//!
//! Every successful store is followed by a scan of the `modules` directory.
//! Only `*.cwasm` files are counted; `*.tmp` files whose modification time is
//! more than an hour old are leftovers of interrupted writers and are
//! deleted; anything else is left alone.  When the summed size of the entries
//! exceeds [`CacheConfig::files_total_size_soft_limit`], or their number
//! exceeds [`CacheConfig::file_count_soft_limit`], the entries with the oldest
//! modification times are deleted until the size and the count are both at
//! most their limit scaled by the matching "percent if deleting" setting.  The
//! entry that was just written is never deleted.  [`Cache`] lookups bump the
//! modification time of the entry they find, so eviction removes the least
//! recently used entries first.
//!
//! The configuration file's format is documented on [`CacheConfig`], where
//! embedders can see it.

use anyhow::{Context, Result, bail};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Qualifier, organization and application names handed to
/// `directories_next::ProjectDirs` for the default directories.
const PROJECT_NAMES: (&str, &str, &str) = ("", "", "wasmtime-mmu");

/// Subdirectory of the cache directory that holds the entries.
const MODULES_SUBDIR: &str = "modules";
/// Extension of finished entries.
const ENTRY_EXTENSION: &str = "cwasm";
/// Extension of files that are still being written.
const TEMP_EXTENSION: &str = "tmp";
/// Age after which a temporary file is assumed to be abandoned.
const STALE_TEMP_AGE: Duration = Duration::from_secs(60 * 60);

const DEFAULT_FILES_TOTAL_SIZE_SOFT_LIMIT: u64 = 512 * 1024 * 1024;
const DEFAULT_FILE_COUNT_SOFT_LIMIT: u64 = 65536;
const DEFAULT_PERCENT_IF_DELETING: u8 = 70;
const DEFAULT_BASELINE_COMPRESSION_LEVEL: i64 = 3;
const DEFAULT_OPTIMIZED_COMPRESSION_LEVEL: i64 = 20;
const COMPRESSION_LEVELS: std::ops::RangeInclusive<i64> = 0..=21;

fn project_dirs() -> Option<directories_next::ProjectDirs> {
    let (qualifier, organization, application) = PROJECT_NAMES;
    directories_next::ProjectDirs::from(qualifier, organization, application)
}

/// Location of the configuration file used by `Cache::from_file(None)`, if a
/// home directory can be determined.
fn default_config_path() -> Option<PathBuf> {
    project_dirs().map(|dirs| dirs.config_dir().join("config.toml"))
}

/// Settings of a [`Cache`]: where it lives and how large it may grow.
///
/// # The configuration file
///
/// [`CacheConfig::from_file`] reads the same TOML format as Wasmtime's cache
/// configuration: a file whose only top-level item is a `[cache]` table.
/// Unknown keys (at the top level or inside `[cache]`) and a missing `[cache]`
/// table are errors.  All values except the compression levels are TOML
/// strings:
///
/// | key | syntax | default |
/// |-----|--------|---------|
/// | `directory` | absolute path | platform cache directory |
/// | `files-total-size-soft-limit` | size: `"100"`, `"10K"`, `"512Mi"`, `"1G"`, `"2Gi"` (`K M G T P` are powers of 1000, `Ki Mi Gi Ti Pi` powers of 1024) | `"512Mi"` |
/// | `file-count-soft-limit` | count: `"100"`, `"4K"`, `"3M"` (`K M G T P`, powers of 1000) | `"65536"` |
/// | `files-total-size-limit-percent-if-deleting` | percent: `"70%"` (0 to 100) | `"70%"` |
/// | `file-count-limit-percent-if-deleting` | percent: `"70%"` (0 to 100) | `"70%"` |
/// | `worker-event-queue-size` | count | `"16"` |
/// | `baseline-compression-level` | integer 0 to 21 | `3` |
/// | `optimized-compression-level` | integer 0 to 21, not below the baseline level | `20` |
/// | `optimized-compression-usage-counter-threshold` | count | `"256"` |
/// | `cleanup-interval` | duration: `"30s"`, `"30m"`, `"1h"`, `"1d"` | `"1h"` |
/// | `optimizing-compression-task-timeout` | duration | `"30m"` |
/// | `allowed-clock-drift-for-files-from-future` | duration | `"1d"` |
///
/// Whitespace around a value and between its number and its unit is ignored.
///
/// The last seven keys are accepted and checked so that a configuration file
/// written for Wasmtime loads unchanged, but they do nothing here: entries are
/// stored uncompressed (so there are no compression levels or recompression
/// thresholds), they are written synchronously by the storing thread (so
/// there is no worker, event queue or task timeout), and eviction runs after
/// every store and orders entries purely by modification time (so there is no
/// cleanup interval and no clock-drift allowance).
///
/// The format has no `enabled` key; like any other unknown key it is rejected.
/// Whether a cache is used at all is decided by whoever creates the [`Cache`].
///
/// A relative `directory` is rejected, both in a file and when set with
/// [`CacheConfig::with_directory`] (reported by [`Cache::new`]).  [`Cache::new`]
/// creates the directory and replaces it by its canonical form.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Cache directory; empty when none was set and no default exists.
    directory: PathBuf,
    files_total_size_soft_limit: u64,
    file_count_soft_limit: u64,
    files_total_size_limit_percent_if_deleting: u8,
    file_count_limit_percent_if_deleting: u8,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            directory: project_dirs()
                .map(|dirs| dirs.cache_dir().to_path_buf())
                .unwrap_or_default(),
            files_total_size_soft_limit: DEFAULT_FILES_TOTAL_SIZE_SOFT_LIMIT,
            file_count_soft_limit: DEFAULT_FILE_COUNT_SOFT_LIMIT,
            files_total_size_limit_percent_if_deleting: DEFAULT_PERCENT_IF_DELETING,
            file_count_limit_percent_if_deleting: DEFAULT_PERCENT_IF_DELETING,
        }
    }
}

impl CacheConfig {
    /// Returns the default settings: the per-user cache directory of the
    /// platform, a 512 MiB size limit, a 65536 entry count limit, and
    /// trimming down to 70% of a limit once it is exceeded.
    pub fn new() -> CacheConfig {
        CacheConfig::default()
    }

    /// Reads settings from the TOML file at `path`.
    ///
    /// The file must contain a `[cache]` table; keys that it leaves out keep
    /// their defaults.  [`CacheConfig`]'s documentation lists the keys and
    /// their syntax.  Errors name the file and, for a bad setting, the key.
    pub fn from_file(path: &Path) -> Result<CacheConfig> {
        let text = fs::read_to_string(path)
            .with_context(|| format!("failed to read cache config file `{}`", path.display()))?;
        match parse_config(&text) {
            Ok(config) => Ok(config),
            Err(message) => bail!("invalid cache config file `{}`: {message}", path.display()),
        }
    }

    /// Sets the cache directory.  It must be an absolute path; [`Cache::new`]
    /// creates it when it does not exist.
    pub fn with_directory(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.directory = dir.into();
        self
    }

    /// Sets the total number of bytes of entries above which eviction starts.
    pub fn with_files_total_size_soft_limit(&mut self, bytes: u64) -> &mut Self {
        self.files_total_size_soft_limit = bytes;
        self
    }

    /// Sets the number of entries above which eviction starts.
    pub fn with_file_count_soft_limit(&mut self, count: u64) -> &mut Self {
        self.file_count_soft_limit = count;
        self
    }

    /// Sets how far eviction reduces the total size once its limit is passed,
    /// as a percentage (0 to 100) of the size limit.
    pub fn with_files_total_size_limit_percent_if_deleting(&mut self, percent: u8) -> &mut Self {
        self.files_total_size_limit_percent_if_deleting = percent;
        self
    }

    /// Sets how far eviction reduces the entry count once its limit is passed,
    /// as a percentage (0 to 100) of the count limit.
    pub fn with_file_count_limit_percent_if_deleting(&mut self, percent: u8) -> &mut Self {
        self.file_count_limit_percent_if_deleting = percent;
        self
    }

    /// The cache directory.  In the configuration held by a [`Cache`] this is
    /// the canonical absolute path; in a configuration built by hand it is
    /// the path as given (or the platform default), and it is empty when no
    /// directory was set and no home directory could be found.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// The total number of bytes of entries above which eviction starts.
    pub fn files_total_size_soft_limit(&self) -> u64 {
        self.files_total_size_soft_limit
    }

    /// The number of entries above which eviction starts.
    pub fn file_count_soft_limit(&self) -> u64 {
        self.file_count_soft_limit
    }

    /// Percentage of the size limit that eviction trims down to.
    fn files_total_size_limit_percent_if_deleting(&self) -> u8 {
        self.files_total_size_limit_percent_if_deleting
    }

    /// Percentage of the count limit that eviction trims down to.
    fn file_count_limit_percent_if_deleting(&self) -> u8 {
        self.file_count_limit_percent_if_deleting
    }
}

// ---------------------------------------------------------------------------
// Configuration file parsing

/// Splits `text` into its leading decimal digits and the (trimmed) rest.
fn split_number_and_unit(text: &str) -> (&str, &str) {
    let text = text.trim();
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    (number, unit.trim())
}

/// Parses a count with an optional decimal prefix (`K`, `M`, `G`, `T`, `P`).
fn parse_count(text: &str) -> Option<u64> {
    let (number, unit) = split_number_and_unit(text);
    let number: u64 = number.parse().ok()?;
    let multiplier: u64 = match unit {
        "" => 1,
        "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        _ => return None,
    };
    number.checked_mul(multiplier)
}

/// Parses a byte size with an optional decimal or binary prefix.
fn parse_size(text: &str) -> Option<u64> {
    let (number, unit) = split_number_and_unit(text);
    let number: u64 = number.parse().ok()?;
    let multiplier: u64 = match unit {
        "" => 1,
        "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        _ => return None,
    };
    number.checked_mul(multiplier)
}

/// Parses a percentage such as `70%`; values above 100 are rejected.
fn parse_percent(text: &str) -> Option<u8> {
    let (number, unit) = split_number_and_unit(text);
    if unit != "%" {
        return None;
    }
    let number: u8 = number.parse().ok()?;
    (number <= 100).then_some(number)
}

/// Parses a duration with a unit of `s`, `m`, `h` or `d`.
fn parse_duration(text: &str) -> Option<Duration> {
    let (number, unit) = split_number_and_unit(text);
    let number: u64 = number.parse().ok()?;
    let seconds_per_unit: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 60 * 60,
        "d" => 24 * 60 * 60,
        _ => return None,
    };
    number
        .checked_mul(seconds_per_unit)
        .map(Duration::from_secs)
}

/// Returns the string value of `key`, or an error naming the key.
fn string_value<'a>(key: &str, value: &'a toml::Value) -> Result<&'a str, String> {
    value.as_str().ok_or_else(|| {
        format!(
            "key `cache.{key}` must be a string, found {} `{value}`",
            value.type_str()
        )
    })
}

/// Applies `parse` to the string value of `key`, producing an error that
/// names the key and describes the expected syntax when it fails.
fn parsed_value<T>(
    key: &str,
    value: &toml::Value,
    expected: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, String> {
    let text = string_value(key, value)?;
    parse(text).ok_or_else(|| {
        format!("key `cache.{key}` has invalid value \"{text}\": expected {expected}")
    })
}

/// Reads a zstd compression level (which has no effect here).
fn compression_level(key: &str, value: &toml::Value) -> Result<i64, String> {
    let level = value.as_integer().ok_or_else(|| {
        format!(
            "key `cache.{key}` must be an integer, found {} `{value}`",
            value.type_str()
        )
    })?;
    if !COMPRESSION_LEVELS.contains(&level) {
        return Err(format!(
            "key `cache.{key}` has invalid value {level}: expected an integer from {} to {}",
            COMPRESSION_LEVELS.start(),
            COMPRESSION_LEVELS.end()
        ));
    }
    Ok(level)
}

const COUNT_SYNTAX: &str = "a count such as \"100\", \"4K\" or \"3M\"";
const SIZE_SYNTAX: &str = "a size such as \"100\", \"512Mi\" or \"1G\"";
const PERCENT_SYNTAX: &str = "a percentage from \"0%\" to \"100%\"";
const DURATION_SYNTAX: &str = "a duration such as \"30s\", \"30m\", \"1h\" or \"1d\"";

/// Turns the text of a configuration file into a configuration.  The error
/// is a message without the file name, which the caller adds.
fn parse_config(text: &str) -> Result<CacheConfig, String> {
    let document: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("not valid TOML: {}", e.to_string().trim_end()))?;

    let mut cache_table = None;
    for (key, value) in &document {
        if key != "cache" {
            return Err(format!(
                "unknown top-level key `{key}`: only a `[cache]` table is allowed"
            ));
        }
        match value.as_table() {
            Some(table) => cache_table = Some(table),
            None => return Err("`cache` must be a table (`[cache]`)".to_string()),
        }
    }
    let Some(table) = cache_table else {
        return Err("missing `[cache]` table".to_string());
    };

    let mut config = CacheConfig::new();
    let mut baseline_level = DEFAULT_BASELINE_COMPRESSION_LEVEL;
    let mut optimized_level = DEFAULT_OPTIMIZED_COMPRESSION_LEVEL;
    for (key, value) in table {
        match key.as_str() {
            "directory" => {
                let path = Path::new(string_value(key, value)?);
                if !path.is_absolute() {
                    return Err(format!(
                        "key `cache.directory` must be an absolute path, found \"{}\"",
                        path.display()
                    ));
                }
                config.directory = path.to_path_buf();
            }
            "files-total-size-soft-limit" => {
                config.files_total_size_soft_limit =
                    parsed_value(key, value, SIZE_SYNTAX, parse_size)?;
            }
            "file-count-soft-limit" => {
                config.file_count_soft_limit = parsed_value(key, value, COUNT_SYNTAX, parse_count)?;
            }
            "files-total-size-limit-percent-if-deleting" => {
                config.files_total_size_limit_percent_if_deleting =
                    parsed_value(key, value, PERCENT_SYNTAX, parse_percent)?;
            }
            "file-count-limit-percent-if-deleting" => {
                config.file_count_limit_percent_if_deleting =
                    parsed_value(key, value, PERCENT_SYNTAX, parse_percent)?;
            }
            // Accepted for compatibility; see the module documentation.
            "worker-event-queue-size" | "optimized-compression-usage-counter-threshold" => {
                parsed_value(key, value, COUNT_SYNTAX, parse_count)?;
            }
            "cleanup-interval"
            | "optimizing-compression-task-timeout"
            | "allowed-clock-drift-for-files-from-future" => {
                parsed_value(key, value, DURATION_SYNTAX, parse_duration)?;
            }
            "baseline-compression-level" => baseline_level = compression_level(key, value)?,
            "optimized-compression-level" => optimized_level = compression_level(key, value)?,
            _ => return Err(format!("unknown key `cache.{key}`")),
        }
    }
    if optimized_level < baseline_level {
        return Err(format!(
            "key `cache.optimized-compression-level` ({optimized_level}) must not be lower \
             than `cache.baseline-compression-level` ({baseline_level})"
        ));
    }
    Ok(config)
}

// ---------------------------------------------------------------------------
// The cache itself

/// A directory of compiled modules, shared by every clone of this handle.
///
/// Cloning is cheap and all clones share the same counters.
#[derive(Clone, Debug)]
pub struct Cache {
    inner: Arc<CacheInner>,
}

#[derive(Debug)]
struct CacheInner {
    config: CacheConfig,
    modules_dir: PathBuf,
    hits: AtomicU64,
    misses: AtomicU64,
    replaced_corrupt: AtomicU64,
}

/// Distinguishes temporary files written by different stores of one process.
static TEMP_FILE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Spells `key` as 64 lowercase hexadecimal digits.
fn key_to_hex(key: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for byte in key {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    hex
}

/// `limit * percent / 100`, without overflow.
fn scaled_limit(limit: u64, percent: u8) -> u64 {
    let scaled = u128::from(limit) * u128::from(percent) / 100;
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

impl Cache {
    /// Opens the cache described by `config`, creating its directory (and
    /// the `modules` subdirectory) when missing.
    ///
    /// Fails when no directory was set and no home directory could be found,
    /// when the directory is a relative path, when a percentage is above 100,
    /// or when the directory cannot be created.
    pub fn new(mut config: CacheConfig) -> Result<Cache> {
        if config.directory.as_os_str().is_empty() {
            bail!(
                "no cache directory was configured and no home directory could be found \
                 to derive a default one"
            );
        }
        if !config.directory.is_absolute() {
            bail!(
                "cache directory `{}` must be an absolute path",
                config.directory.display()
            );
        }
        for (name, percent) in [
            (
                "files-total-size-limit-percent-if-deleting",
                config.files_total_size_limit_percent_if_deleting,
            ),
            (
                "file-count-limit-percent-if-deleting",
                config.file_count_limit_percent_if_deleting,
            ),
        ] {
            if percent > 100 {
                bail!("cache setting `{name}` is {percent}%, which is above 100%");
            }
        }
        fs::create_dir_all(&config.directory).with_context(|| {
            format!(
                "failed to create cache directory `{}`",
                config.directory.display()
            )
        })?;
        config.directory = fs::canonicalize(&config.directory).with_context(|| {
            format!(
                "failed to resolve cache directory `{}`",
                config.directory.display()
            )
        })?;
        let modules_dir = config.directory.join(MODULES_SUBDIR);
        fs::create_dir_all(&modules_dir).with_context(|| {
            format!(
                "failed to create cache directory `{}`",
                modules_dir.display()
            )
        })?;
        Ok(Cache {
            inner: Arc::new(CacheInner {
                config,
                modules_dir,
                hits: AtomicU64::new(0),
                misses: AtomicU64::new(0),
                replaced_corrupt: AtomicU64::new(0),
            }),
        })
    }

    /// Opens a cache configured by a TOML file.
    ///
    /// With `Some(path)` the file must exist and is read with
    /// [`CacheConfig::from_file`].  With `None` the per-user configuration
    /// file (`config.toml` in the platform configuration directory for
    /// `wasmtime-mmu`) is read if it exists; otherwise the defaults are used.
    pub fn from_file(path: Option<&Path>) -> Result<Cache> {
        let config = match path {
            Some(path) => CacheConfig::from_file(path)?,
            None => match default_config_path() {
                Some(default) if default.exists() => CacheConfig::from_file(&default)?,
                _ => CacheConfig::new(),
            },
        };
        Cache::new(config)
    }

    /// The configuration in effect, with the directory in canonical form.
    pub fn config(&self) -> &CacheConfig {
        &self.inner.config
    }

    /// How many lookups found a usable entry.
    pub fn hits(&self) -> u64 {
        self.inner.hits.load(Ordering::Relaxed)
    }

    /// How many lookups found no entry.
    pub fn misses(&self) -> u64 {
        self.inner.misses.load(Ordering::Relaxed)
    }

    /// How many entries were found unusable and replaced.
    pub fn replaced_corrupt(&self) -> u64 {
        self.inner.replaced_corrupt.load(Ordering::Relaxed)
    }

    /// The file that holds (or would hold) the entry for `key`.
    pub(crate) fn entry_path(&self, key: &[u8; 32]) -> PathBuf {
        let mut name = key_to_hex(key);
        name.push('.');
        name.push_str(ENTRY_EXTENSION);
        self.inner.modules_dir.join(name)
    }

    /// Returns the path of the entry for `key` when it is a regular file,
    /// after setting its modification time to now so that eviction sees it
    /// as recently used.  Counts nothing: the caller validates the entry and
    /// then calls [`Cache::record_hit`], [`Cache::record_miss`] or
    /// [`Cache::record_corrupt`].
    pub(crate) fn lookup(&self, key: &[u8; 32]) -> Option<PathBuf> {
        let path = self.entry_path(key);
        match fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.is_file() => {}
            _ => return None,
        }
        if let Err(e) = touch(&path) {
            log::debug!(
                "could not refresh modification time of cache entry `{}`: {e}",
                path.display()
            );
        }
        Some(path)
    }

    /// Counts a lookup that produced a usable entry.
    pub(crate) fn record_hit(&self) {
        self.inner.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a lookup that found no entry.
    pub(crate) fn record_miss(&self) {
        self.inner.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an entry that was found unusable and is being replaced.
    pub(crate) fn record_corrupt(&self) {
        self.inner.replaced_corrupt.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes `bytes` as the entry for `key`, replacing any previous entry
    /// atomically, then evicts old entries if the limits are exceeded.
    ///
    /// Errors while writing the entry are returned; problems during eviction
    /// are only logged.
    pub(crate) fn store(&self, key: &[u8; 32], bytes: &[u8]) -> Result<()> {
        let final_path = self.entry_path(key);
        let temp_path = self.inner.modules_dir.join(format!(
            "{}.{}.{}.{TEMP_EXTENSION}",
            key_to_hex(key),
            std::process::id(),
            TEMP_FILE_COUNTER.fetch_add(1, Ordering::Relaxed),
        ));

        if let Err(e) = write_new_file(&temp_path, bytes) {
            let _ = fs::remove_file(&temp_path);
            return Err(e).with_context(|| {
                format!(
                    "failed to write cache entry to temporary file `{}`",
                    temp_path.display()
                )
            });
        }
        if let Err(e) = fs::rename(&temp_path, &final_path) {
            let _ = fs::remove_file(&temp_path);
            // Windows refuses to replace a file that another process has
            // open; that process is storing or using an entry for the very
            // same key, so the entry already in place is as good as ours.
            if cfg!(windows) && final_path.is_file() {
                log::debug!(
                    "kept existing cache entry `{}` that could not be replaced: {e}",
                    final_path.display()
                );
            } else {
                return Err(e).with_context(|| {
                    format!(
                        "failed to move cache entry from `{}` to `{}`",
                        temp_path.display(),
                        final_path.display()
                    )
                });
            }
        }

        self.trim(&final_path);
        Ok(())
    }

    /// Deletes the entry for `key` (for instance because it turned out to be
    /// unusable).  Failures are only logged.
    pub(crate) fn remove(&self, key: &[u8; 32]) {
        let path = self.entry_path(key);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("failed to delete cache entry `{}`: {e}", path.display()),
        }
    }

    /// Evicts the least recently modified entries if the directory is over
    /// either soft limit, never touching `keep`.  Also deletes abandoned
    /// temporary files.
    fn trim(&self, keep: &Path) {
        let dir = &self.inner.modules_dir;
        let reader = match fs::read_dir(dir) {
            Ok(reader) => reader,
            Err(e) => {
                log::warn!(
                    "cache eviction: failed to list directory `{}`: {e}",
                    dir.display()
                );
                return;
            }
        };

        let now = SystemTime::now();
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for item in reader {
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    log::warn!(
                        "cache eviction: failed to list directory `{}`: {e}",
                        dir.display()
                    );
                    continue;
                }
            };
            let path = item.path();
            let extension = path.extension().and_then(|ext| ext.to_str());
            let is_entry = extension == Some(ENTRY_EXTENSION);
            let is_temp = extension == Some(TEMP_EXTENSION);
            if !is_entry && !is_temp {
                continue;
            }
            let metadata = match item.metadata() {
                Ok(metadata) => metadata,
                // Another process deleted or renamed it meanwhile.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    log::warn!(
                        "cache eviction: failed to inspect `{}`: {e}",
                        path.display()
                    );
                    continue;
                }
            };
            if !metadata.is_file() {
                continue;
            }
            let modified = match metadata.modified() {
                Ok(modified) => modified,
                Err(e) => {
                    log::warn!(
                        "cache eviction: failed to read modification time of `{}`: {e}",
                        path.display()
                    );
                    continue;
                }
            };
            if is_temp {
                let stale = now
                    .duration_since(modified)
                    .is_ok_and(|age| age > STALE_TEMP_AGE);
                if stale {
                    delete_for_eviction(&path);
                }
                continue;
            }
            entries.push((modified, metadata.len(), path));
        }

        let config = &self.inner.config;
        let mut total_size: u64 = entries.iter().map(|(_, len, _)| *len).sum();
        let mut count = entries.len() as u64;
        if total_size <= config.files_total_size_soft_limit()
            && count <= config.file_count_soft_limit()
        {
            return;
        }
        let size_target = scaled_limit(
            config.files_total_size_soft_limit(),
            config.files_total_size_limit_percent_if_deleting(),
        );
        let count_target = scaled_limit(
            config.file_count_soft_limit(),
            config.file_count_limit_percent_if_deleting(),
        );
        log::debug!(
            "cache eviction: {count} entries, {total_size} bytes; trimming to at most \
             {count_target} entries and {size_target} bytes"
        );

        entries.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.2.cmp(&b.2)));
        for (_, len, path) in &entries {
            if total_size <= size_target && count <= count_target {
                break;
            }
            if path == keep {
                continue;
            }
            if delete_for_eviction(path) {
                total_size = total_size.saturating_sub(*len);
                count -= 1;
            }
        }
    }
}

/// Creates `path` (which must not exist yet), writes `bytes` to it and
/// flushes it to disk.
fn write_new_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = fs::File::create_new(path)?;
    file.write_all(bytes)?;
    file.flush()?;
    file.sync_data()
}

/// Sets the modification time of `path` to now.
fn touch(path: &Path) -> io::Result<()> {
    // Write access (without truncation) is what Windows needs to change the
    // times; a read-only handle suffices on Unix for a file we own.
    let file = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .or_else(|_| fs::File::open(path))?;
    file.set_modified(SystemTime::now())
}

/// Deletes a file during eviction.  Returns whether the file is gone, logging
/// any failure other than the file having vanished already.
fn delete_for_eviction(path: &Path) -> bool {
    match fs::remove_file(path) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => {
            log::warn!("cache eviction: failed to delete `{}`: {e}", path.display());
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    fn key(n: u8) -> [u8; 32] {
        let mut key = [0u8; 32];
        key[0] = n;
        key[31] = 0xa5;
        key
    }

    fn cache_in(dir: &Path, configure: impl FnOnce(&mut CacheConfig)) -> Cache {
        let mut config = CacheConfig::new();
        config.with_directory(dir.join("cache"));
        configure(&mut config);
        Cache::new(config).unwrap()
    }

    fn set_mtime(path: &Path, time: SystemTime) {
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(time)
            .unwrap();
    }

    fn modules_listing(cache: &Cache) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&cache.inner.modules_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn entry_name(n: u8) -> String {
        format!("{}.cwasm", key_to_hex(&key(n)))
    }

    #[test]
    fn entry_path_layout() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |_| {});
        let mut k = [0u8; 32];
        k[0] = 0xab;
        k[1] = 0x01;
        k[31] = 0xff;
        let expected = format!("ab01{}ff.cwasm", "0".repeat(58));
        let dir = fs::canonicalize(td.path().join("cache")).unwrap();
        assert_eq!(cache.config().directory(), dir);
        assert_eq!(cache.entry_path(&k), dir.join("modules").join(expected));
    }

    #[test]
    fn store_then_lookup() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |_| {});
        assert_eq!(cache.lookup(&key(1)), None);

        cache.store(&key(1), b"compiled module one").unwrap();
        let path = cache.lookup(&key(1)).expect("stored entry is found");
        assert_eq!(path, cache.entry_path(&key(1)));
        assert_eq!(fs::read(&path).unwrap(), b"compiled module one");
        assert_eq!(cache.lookup(&key(2)), None);

        // Storing again replaces the entry.
        cache.store(&key(1), b"v2").unwrap();
        assert_eq!(fs::read(cache.lookup(&key(1)).unwrap()).unwrap(), b"v2");
        assert_eq!(modules_listing(&cache), vec![entry_name(1)]);

        // A directory with the entry's name is not an entry.
        fs::create_dir(cache.entry_path(&key(3))).unwrap();
        assert_eq!(cache.lookup(&key(3)), None);
    }

    #[test]
    fn lookup_refreshes_mtime() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |_| {});
        cache.store(&key(1), b"abc").unwrap();
        let path = cache.entry_path(&key(1));
        let old = SystemTime::now() - Duration::from_secs(10 * 24 * 3600);
        set_mtime(&path, old);
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), old);
        cache.lookup(&key(1)).unwrap();
        let refreshed = fs::metadata(&path).unwrap().modified().unwrap();
        assert!(refreshed > old + Duration::from_secs(9 * 24 * 3600));
    }

    #[test]
    fn remove_deletes_entry() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |_| {});
        cache.store(&key(1), b"abc").unwrap();
        cache.remove(&key(1));
        assert_eq!(cache.lookup(&key(1)), None);
        // Removing a missing entry is harmless.
        cache.remove(&key(1));
    }

    #[test]
    fn concurrent_stores_of_one_key() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |_| {});
        let threads = 8;
        let payloads: Vec<Vec<u8>> = (0..threads)
            .map(|i| vec![i as u8; 64 * 1024 + i * 100])
            .collect();
        let barrier = Barrier::new(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = payloads
                .iter()
                .map(|payload| {
                    let cache = cache.clone();
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        cache.store(&key(7), payload)
                    })
                })
                .collect();
            for handle in handles {
                handle.join().unwrap().unwrap();
            }
        });
        let stored = fs::read(cache.lookup(&key(7)).unwrap()).unwrap();
        assert!(payloads.contains(&stored));
        assert_eq!(modules_listing(&cache), vec![entry_name(7)]);
    }

    #[test]
    fn store_error_is_returned() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |_| {});
        fs::remove_dir(&cache.inner.modules_dir).unwrap();
        let err = cache.store(&key(1), b"abc").unwrap_err();
        assert!(format!("{err:#}").contains("temporary file"), "{err:#}");
    }

    /// Writes an entry directly (without trimming) with a given age.
    fn plant(cache: &Cache, n: u8, len: usize, mtime: SystemTime) {
        let path = cache.entry_path(&key(n));
        fs::write(&path, vec![n; len]).unwrap();
        set_mtime(&path, mtime);
    }

    #[test]
    fn trim_by_size_keeps_newest() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |c| {
            c.with_files_total_size_soft_limit(1000)
                .with_files_total_size_limit_percent_if_deleting(50);
        });
        let now = SystemTime::now();
        // Ages deliberately not in key order.
        for (n, age) in [(1u8, 300u64), (2, 100), (3, 500), (4, 200), (5, 400)] {
            plant(&cache, n, 200, now - Duration::from_secs(age));
        }
        // 1000 bytes: at the limit, nothing is evicted.
        cache.store(&key(6), &[6; 0]).unwrap();
        assert_eq!(modules_listing(&cache).len(), 6);

        // 1200 bytes: over the limit, trim to at most 500 bytes.
        cache.store(&key(7), &[7; 200]).unwrap();
        let mut expected = vec![entry_name(2), entry_name(6), entry_name(7)];
        expected.sort();
        assert_eq!(modules_listing(&cache), expected);
    }

    #[test]
    fn trim_by_count_never_deletes_new_entry() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |c| {
            c.with_file_count_soft_limit(4)
                .with_file_count_limit_percent_if_deleting(75);
        });
        // Entries from the future, so the stored entry is the oldest one.
        let now = SystemTime::now();
        for (n, ahead) in [(1u8, 3000u64), (2, 1000), (3, 4000), (4, 2000)] {
            plant(&cache, n, 10, now + Duration::from_secs(ahead));
        }
        cache.store(&key(9), b"new").unwrap();
        // Five entries > 4: trim to 3, keeping the new one and the two newest.
        let mut expected = vec![entry_name(1), entry_name(3), entry_name(9)];
        expected.sort();
        assert_eq!(modules_listing(&cache), expected);
    }

    #[test]
    fn trim_handles_other_files() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |c| {
            c.with_file_count_soft_limit(2)
                .with_files_total_size_soft_limit(100);
        });
        let dir = cache.inner.modules_dir.clone();
        let now = SystemTime::now();
        let stale = dir.join("old.1.2.tmp");
        let fresh = dir.join("fresh.1.3.tmp");
        let other = dir.join("notes.txt");
        fs::write(&stale, vec![0; 1000]).unwrap();
        set_mtime(&stale, now - Duration::from_secs(2 * 3600));
        fs::write(&fresh, vec![0; 1000]).unwrap();
        fs::write(&other, vec![0; 1000]).unwrap();
        fs::create_dir(dir.join("sub.cwasm")).unwrap();
        plant(&cache, 1, 10, now - Duration::from_secs(60));

        cache.store(&key(2), b"x").unwrap();
        let mut expected = vec![
            entry_name(1),
            entry_name(2),
            "fresh.1.3.tmp".to_string(),
            "notes.txt".to_string(),
            "sub.cwasm".to_string(),
        ];
        expected.sort();
        assert_eq!(modules_listing(&cache), expected);
    }

    #[test]
    fn counters() {
        let td = tempfile::tempdir().unwrap();
        let cache = cache_in(td.path(), |_| {});
        let clone = cache.clone();
        assert_eq!(
            (cache.hits(), cache.misses(), cache.replaced_corrupt()),
            (0, 0, 0)
        );
        cache.record_hit();
        clone.record_hit();
        cache.record_miss();
        clone.record_corrupt();
        clone.record_corrupt();
        clone.record_corrupt();
        assert_eq!(
            (cache.hits(), cache.misses(), cache.replaced_corrupt()),
            (2, 1, 3)
        );
        // Lookups themselves do not count.
        cache.store(&key(1), b"a").unwrap();
        cache.lookup(&key(1)).unwrap();
        assert!(cache.lookup(&key(2)).is_none());
        assert_eq!((clone.hits(), clone.misses()), (2, 1));
    }

    #[test]
    fn new_validates_and_creates_directory() {
        let td = tempfile::tempdir().unwrap();
        let nested = td.path().join("a").join("b");
        let mut config = CacheConfig::new();
        config.with_directory(&nested);
        let cache = Cache::new(config).unwrap();
        assert!(nested.join("modules").is_dir());
        assert_eq!(
            cache.config().directory(),
            fs::canonicalize(&nested).unwrap()
        );

        let mut config = CacheConfig::new();
        config.with_directory("relative/dir");
        let err = Cache::new(config).unwrap_err().to_string();
        assert!(
            err.contains("relative/dir") && err.contains("absolute"),
            "{err}"
        );

        let mut config = CacheConfig::new();
        config.with_directory("");
        let err = Cache::new(config).unwrap_err().to_string();
        assert!(err.contains("no cache directory"), "{err}");

        let file = td.path().join("plain-file");
        fs::write(&file, b"").unwrap();
        let mut config = CacheConfig::new();
        config.with_directory(file.join("cache"));
        let err = Cache::new(config).unwrap_err().to_string();
        assert!(
            err.contains(&file.join("cache").display().to_string()),
            "{err}"
        );

        let mut config = CacheConfig::new();
        config
            .with_directory(td.path())
            .with_file_count_limit_percent_if_deleting(101);
        let err = Cache::new(config).unwrap_err().to_string();
        assert!(
            err.contains("file-count-limit-percent-if-deleting"),
            "{err}"
        );
    }

    #[test]
    fn defaults_match_upstream() {
        let config = CacheConfig::new();
        assert_eq!(config.files_total_size_soft_limit(), 512 * 1024 * 1024);
        assert_eq!(config.file_count_soft_limit(), 65536);
        assert_eq!(config.files_total_size_limit_percent_if_deleting(), 70);
        assert_eq!(config.file_count_limit_percent_if_deleting(), 70);
        if let Some(dirs) = project_dirs() {
            assert_eq!(config.directory(), dirs.cache_dir());
            assert!(default_config_path().unwrap().ends_with("config.toml"));
        }
    }

    fn write_config(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("cache-config.toml");
        fs::write(&path, body).unwrap();
        path
    }

    fn load(dir: &Path, body: &str) -> Result<CacheConfig> {
        CacheConfig::from_file(&write_config(dir, body))
    }

    fn load_err(dir: &Path, body: &str) -> String {
        let err = load(dir, body).unwrap_err().to_string();
        let file = dir.join("cache-config.toml").display().to_string();
        assert!(err.contains(&file), "error does not name the file: {err}");
        err
    }

    #[test]
    fn toml_full_upstream_file() {
        let td = tempfile::tempdir().unwrap();
        let cache_dir = td.path().join("cache-dir");
        let body = format!(
            "[cache]\n\
             directory = '{}'\n\
             worker-event-queue-size = '16'\n\
             baseline-compression-level = 3\n\
             optimized-compression-level = 20\n\
             optimized-compression-usage-counter-threshold = '256'\n\
             cleanup-interval = '1h'\n\
             optimizing-compression-task-timeout = '30m'\n\
             allowed-clock-drift-for-files-from-future = '1d'\n\
             file-count-soft-limit = '65536'\n\
             files-total-size-soft-limit = '512Mi'\n\
             file-count-limit-percent-if-deleting = '60%'\n\
             files-total-size-limit-percent-if-deleting = '80%'\n",
            cache_dir.display()
        );
        let config = load(td.path(), &body).unwrap();
        assert_eq!(config.directory(), cache_dir);
        assert_eq!(config.file_count_soft_limit(), 65536);
        assert_eq!(config.files_total_size_soft_limit(), 512 << 20);
        assert_eq!(config.file_count_limit_percent_if_deleting(), 60);
        assert_eq!(config.files_total_size_limit_percent_if_deleting(), 80);

        // Whitespace inside values, as upstream accepts.
        let body = format!(
            "[cache]\n\
             directory = '{}'\n\
             worker-event-queue-size  = ' 16\t'\n\
             cleanup-interval = ' 1h'\n\
             optimizing-compression-task-timeout = '30  m'\n\
             allowed-clock-drift-for-files-from-future = '1\td'\n\
             file-count-soft-limit = '\t \t65536\t'\n\
             files-total-size-soft-limit = '512\t\t Mi '\n\
             file-count-limit-percent-if-deleting = '70\t%'\n\
             files-total-size-limit-percent-if-deleting = ' 70 %'\n",
            cache_dir.display()
        );
        let config = load(td.path(), &body).unwrap();
        assert_eq!(config.file_count_soft_limit(), 65536);
        assert_eq!(config.files_total_size_soft_limit(), 512 << 20);
        assert_eq!(config.file_count_limit_percent_if_deleting(), 70);

        // The file loads into a working cache, which creates the directory.
        let cache = Cache::from_file(Some(&td.path().join("cache-config.toml"))).unwrap();
        assert_eq!(
            cache.config().directory(),
            fs::canonicalize(&cache_dir).unwrap()
        );
        assert_eq!(cache.config().files_total_size_soft_limit(), 512 << 20);
    }

    #[test]
    fn toml_empty_table_uses_defaults() {
        let td = tempfile::tempdir().unwrap();
        let config = load(td.path(), "# nothing set\n[cache]\n").unwrap();
        let defaults = CacheConfig::new();
        assert_eq!(config.directory(), defaults.directory());
        assert_eq!(config.file_count_soft_limit(), 65536);
        assert_eq!(config.files_total_size_soft_limit(), 512 << 20);
    }

    #[test]
    fn toml_sizes_counts_percents() {
        let td = tempfile::tempdir().unwrap();
        let size = |text: &str| {
            load(
                td.path(),
                &format!("[cache]\nfiles-total-size-soft-limit = '{text}'\n"),
            )
            .map(|c| c.files_total_size_soft_limit())
        };
        assert_eq!(size("512Mi").unwrap(), 512 * 1024 * 1024);
        assert_eq!(size("1G").unwrap(), 1_000_000_000);
        assert_eq!(size("100").unwrap(), 100);
        assert_eq!(size("42 Mi").unwrap(), 42 << 20);
        assert_eq!(size("2 Gi").unwrap(), 2 << 30);
        assert_eq!(size("7K").unwrap(), 7000);
        assert_eq!(size("3Ki").unwrap(), 3072);
        assert_eq!(size("1Pi").unwrap(), 1 << 50);
        for bad in ["1g", "3.5M", "-1", "Mi", "", "99999999999999999P", "1 Mib"] {
            assert!(size(bad).is_err(), "{bad:?} accepted");
        }

        let count = |text: &str| {
            load(
                td.path(),
                &format!("[cache]\nfile-count-soft-limit = '{text}'\n"),
            )
            .map(|c| c.file_count_soft_limit())
        };
        assert_eq!(count("42").unwrap(), 42);
        assert_eq!(count("4K").unwrap(), 4000);
        assert_eq!(count("3M").unwrap(), 3_000_000);
        assert_eq!(count("1P").unwrap(), 1_000_000_000_000_000);
        for bad in ["2g", "3Ki", "-31337", "3.14M"] {
            assert!(count(bad).is_err(), "{bad:?} accepted");
        }
        // As upstream: counts and sizes must be strings, not TOML integers.
        let err = load_err(td.path(), "[cache]\nfile-count-soft-limit = 1\n");
        assert!(err.contains("`cache.file-count-soft-limit`"), "{err}");

        let percent = |text: &str| {
            load(
                td.path(),
                &format!("[cache]\nfile-count-limit-percent-if-deleting = '{text}'\n"),
            )
            .map(|c| c.file_count_limit_percent_if_deleting())
        };
        assert_eq!(percent("70%").unwrap(), 70);
        assert_eq!(percent("0%").unwrap(), 0);
        assert_eq!(percent("100%").unwrap(), 100);
        for bad in ["70", "101%", "256%", "-5%", "7 0%", "%"] {
            assert!(percent(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn toml_ignored_keys_are_validated() {
        let td = tempfile::tempdir().unwrap();
        let ok = "[cache]\n\
                  cleanup-interval = '30s'\n\
                  optimizing-compression-task-timeout = '2h'\n\
                  allowed-clock-drift-for-files-from-future = '0d'\n\
                  worker-event-queue-size = '2K'\n\
                  optimized-compression-usage-counter-threshold = '4444T'\n\
                  baseline-compression-level = 1\n\
                  optimized-compression-level = 21\n";
        load(td.path(), ok).unwrap();
        for (body, key) in [
            ("cleanup-interval = '1w'", "cleanup-interval"),
            ("cleanup-interval = '30'", "cleanup-interval"),
            ("worker-event-queue-size = '2g'", "worker-event-queue-size"),
            (
                "baseline-compression-level = -1",
                "baseline-compression-level",
            ),
            (
                "baseline-compression-level = '3'",
                "baseline-compression-level",
            ),
            (
                "optimized-compression-level = 22",
                "optimized-compression-level",
            ),
            (
                "baseline-compression-level = 15\noptimized-compression-level = 10",
                "optimized-compression-level",
            ),
        ] {
            let err = load_err(td.path(), &format!("[cache]\n{body}\n"));
            assert!(err.contains(key), "{body}: {err}");
        }
    }

    #[test]
    fn toml_errors() {
        let td = tempfile::tempdir().unwrap();

        let err = load_err(td.path(), "[cache]\nunrecognized-setting = 42\n");
        assert!(
            err.contains("unknown key `cache.unrecognized-setting`"),
            "{err}"
        );
        let err = load_err(td.path(), "unrecognized-setting = 42\n[cache]\n");
        assert!(err.contains("`unrecognized-setting`"), "{err}");
        // Upstream has no `enabled` key.
        let err = load_err(td.path(), "[cache]\nenabled = true\n");
        assert!(err.contains("`cache.enabled`"), "{err}");

        let err = load_err(td.path(), "");
        assert!(err.contains("missing `[cache]` table"), "{err}");
        let err = load_err(td.path(), "cache = 3\n");
        assert!(err.contains("must be a table"), "{err}");
        let err = load_err(td.path(), "[cache\n");
        assert!(err.contains("TOML"), "{err}");

        let err = load_err(
            td.path(),
            "[cache]\nfiles-total-size-soft-limit = '12 parsecs'\n",
        );
        assert!(
            err.contains("`cache.files-total-size-soft-limit`") && err.contains("12 parsecs"),
            "{err}"
        );
        let err = load_err(
            td.path(),
            "[cache]\nfiles-total-size-limit-percent-if-deleting = '150%'\n",
        );
        assert!(
            err.contains("`cache.files-total-size-limit-percent-if-deleting`"),
            "{err}"
        );

        let missing = td.path().join("does-not-exist.toml");
        let err = CacheConfig::from_file(&missing).unwrap_err();
        assert!(
            err.to_string().contains(&missing.display().to_string()),
            "{err}"
        );
        assert!(Cache::from_file(Some(&missing)).is_err());
    }

    #[test]
    fn toml_directory_must_be_absolute() {
        let td = tempfile::tempdir().unwrap();
        let err = load_err(td.path(), "[cache]\ndirectory = 'relative/cache'\n");
        assert!(
            err.contains("`cache.directory`")
                && err.contains("absolute")
                && err.contains("relative/cache"),
            "{err}"
        );
        let err = load_err(td.path(), "[cache]\ndirectory = 5\n");
        assert!(
            err.contains("`cache.directory`") && err.contains("string"),
            "{err}"
        );
        // Not created before the cache is opened.
        let dir = td.path().join("later");
        load(
            td.path(),
            &format!("[cache]\ndirectory = '{}'\n", dir.display()),
        )
        .unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn helpers() {
        assert_eq!(scaled_limit(1000, 70), 700);
        assert_eq!(scaled_limit(u64::MAX, 100), u64::MAX);
        assert_eq!(scaled_limit(u64::MAX, 50), u64::MAX / 2);
        assert_eq!(parse_duration("1d"), Some(Duration::from_secs(86400)));
        assert_eq!(parse_duration("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(parse_duration(" 5 s "), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("1"), None);
        assert_eq!(key_to_hex(&[0xff; 32]), "f".repeat(64));
    }
}
