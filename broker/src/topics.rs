//! The topic catalog: which topics exist, their partition count, replication factor and config
//! overrides, and the [`Partition`]s this broker hosts for them.
//!
//! The catalog is persisted as `topics.json` in the first log directory, rewritten atomically
//! (temp file, fsync, rename, fsync dir) on every create and delete, so a restart keeps every
//! topic whose creation was answered. Partition logs live in `<log dir>/<topic>-<partition>`.
//!
//! Deletion removes the topic from the catalog first, then renames each partition directory to
//! `<topic>-<partition>.<millis>x<n>-delete` (the topic cut short to fit 255 bytes) and removes
//! it; a crash in between leaves `-delete` directories, which the next start removes. A new
//! topic never reuses a leftover directory.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

use crate::config::{Config, TopicConfig};
use crate::error::{ApiError, ErrorKind};
use crate::partition::Partition;
use crate::storage::{write_atomically, LogError};

/// File name of the catalog in the first log directory.
pub const CATALOG_FILE: &str = "topics.json";

/// Upper bound on partitions per topic: each partition holds open files, and a typo such as
/// `"partitions": 100000` should fail rather than exhaust file descriptors.
pub const PARTITIONS_MAX: u32 = 1_000;

/// Kafka's limit on topic name length: `<topic>-<partition>` then fits in a file name.
const TOPIC_NAME_LEN_MAX: usize = 249;

/// Longest file name of the usual Linux file systems (ext4, xfs, btrfs, tmpfs), in bytes.
const FILE_NAME_LEN_MAX: usize = 255;

/// Why the catalog could not be opened at start-up.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A log directory could not be created, locked or read.
    #[error("log directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `topics.json` exists but does not parse.
    #[error("topic catalog {path} is unreadable: {reason}")]
    Corrupt {
        /// The catalog file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A partition log failed to open or recover.
    #[error("partition {topic}/{partition}: {source:?}")]
    Log {
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: u32,
        /// The storage error.
        source: LogError,
    },
}

/// What the catalog stores about a topic (the persisted part).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    /// Number of partitions.
    pub partitions: u32,
    /// Replicas per partition.
    pub replication_factor: u16,
    /// Topic-level config overrides, under Kafka's topic names.
    pub configs: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct CatalogFile {
    /// Format version, so a later format can be told apart.
    version: u32,
    topics: BTreeMap<String, TopicMeta>,
}

/// A topic hosted by this broker.
pub struct Topic {
    /// The topic's name (valid by [`validate_topic_name`]).
    pub name: String,
    /// Persisted description.
    pub meta: TopicMeta,
    /// Parsed overrides of `meta.configs`.
    pub config: TopicConfig,
    /// One entry per partition, index = partition number.
    pub partitions: Vec<Arc<Partition>>,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.name)
            .field("meta", &self.meta)
            .finish()
    }
}

/// Checks Kafka's rule for topic names: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`
/// (so a name can never escape the log directory).
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let invalid = |why: &str| {
        Err(ApiError::new(
            ErrorKind::InvalidTopicException,
            format!("invalid topic name {name:?}: {why}"),
        ))
    };
    if name.is_empty() || name.len() > TOPIC_NAME_LEN_MAX {
        return invalid("must be 1 to 249 characters long");
    }
    if name == "." || name == ".." {
        return invalid("\".\" and \"..\" are not allowed");
    }
    let legal = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-';
    if !name.chars().all(legal) {
        return invalid("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// An exclusive `flock` on `<dir>/.lock`, held while the broker runs, so two brokers
/// never share a log directory (Kafka does the same).
struct DirLock {
    _file: File,
}

impl DirLock {
    fn acquire(dir: &Path) -> std::io::Result<DirLock> {
        let file = File::create(dir.join(".lock"))?;
        // SAFETY: flock on a valid, owned file descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let error = std::io::Error::last_os_error();
            return Err(std::io::Error::new(
                error.kind(),
                format!("already locked by another process ({error})"),
            ));
        }
        Ok(DirLock { _file: file })
    }
}

/// The topics of this broker and their partitions.
pub struct TopicCatalog {
    /// The broker's settings: defaults for new topics and their logs.
    config: Config,
    /// `<first log dir>/topics.json`.
    path: PathBuf,
    /// Every hosted topic; read on each request, written on create/delete.
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Serialises creates and deletes so catalog writes happen in the order of the map changes.
    admin: tokio::sync::Mutex<()>,
    /// Locks on every log directory, held until [`TopicCatalog::release_dir_locks`].
    locks: Mutex<Vec<DirLock>>,
}

impl TopicCatalog {
    /// Locks the log directories, reads the catalog and opens (recovers) every partition log.
    pub fn open(config: &Config) -> Result<TopicCatalog, CatalogError> {
        let mut locks = Vec::new();
        for dir in &config.log_dirs {
            let dir_error = |source| CatalogError::Dir {
                path: dir.clone(),
                source,
            };
            std::fs::create_dir_all(dir).map_err(dir_error)?;
            locks.push(DirLock::acquire(dir).map_err(dir_error)?);
            remove_deleted_dirs(dir).map_err(dir_error)?;
        }
        let path = config.log_dirs[0].join(CATALOG_FILE);
        let stored = read_catalog(&path)?;
        let mut topics = BTreeMap::new();
        for (name, meta) in stored.topics {
            let topic = open_topic(config, &name, meta, false)?;
            topics.insert(name, Arc::new(topic));
        }
        warn_about_stray_dirs(config, &topics);
        Ok(TopicCatalog {
            config: config.clone(),
            path,
            topics: RwLock::new(topics),
            admin: tokio::sync::Mutex::new(()),
            locks: Mutex::new(locks),
        })
    }

    /// Releases the log directory locks (at shutdown, after the last flush).
    pub fn release_dir_locks(&self) {
        self.locks.lock().expect("dir locks").clear();
    }

    /// The topic named `name`, if hosted here.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().expect("catalog lock").get(name).cloned()
    }

    /// Partition `partition` of `topic`, or UNKNOWN_TOPIC_OR_PARTITION.
    pub fn partition(&self, topic: &str, partition: u32) -> Result<Arc<Partition>, ApiError> {
        let found = self
            .get(topic)
            .and_then(|t| t.partitions.get(partition as usize).cloned());
        found.ok_or_else(|| ApiError::unknown_topic(topic, Some(partition)))
    }

    /// Every hosted topic, by name.
    pub fn list(&self) -> Vec<Arc<Topic>> {
        self.topics
            .read()
            .expect("catalog lock")
            .values()
            .cloned()
            .collect()
    }

    /// Creates a topic: validates, creates the partition logs, then persists the catalog. Nothing
    /// is left on disk when it fails.
    pub async fn create(&self, name: &str, meta: TopicMeta) -> Result<Arc<Topic>, ApiError> {
        validate_topic_name(name)?;
        if meta.partitions == 0 || meta.partitions > PARTITIONS_MAX {
            return Err(ApiError::new(
                ErrorKind::InvalidPartitions,
                format!(
                    "partitions must be 1..={PARTITIONS_MAX}, got {}",
                    meta.partitions
                ),
            ));
        }
        TopicConfig::from_map(&meta.configs)
            .map_err(|e| ApiError::new(ErrorKind::InvalidConfig, e.to_string()))?;
        let _admin = self.admin.lock().await;
        if self.get(name).is_some() {
            return Err(ApiError::new(
                ErrorKind::TopicAlreadyExists,
                format!("topic {name:?} already exists"),
            ));
        }
        let topic = open_topic(&self.config, name, meta, true).map_err(|e| {
            ApiError::new(
                ErrorKind::KafkaStorageError,
                format!("creating {name}: {e}"),
            )
        })?;
        let topic = Arc::new(topic);
        let mut next = self.snapshot();
        next.insert(name.to_string(), topic.meta.clone());
        if let Err(error) = self.persist(next) {
            for partition in &topic.partitions {
                let _ = remove_partition_dir(&partition.dir);
            }
            return Err(error);
        }
        self.topics
            .write()
            .expect("catalog lock")
            .insert(name.to_string(), topic.clone());
        Ok(topic)
    }

    /// Deletes a topic: forgets it durably, then removes its partition directories.
    pub async fn delete(&self, name: &str) -> Result<(), ApiError> {
        validate_topic_name(name)?;
        let _admin = self.admin.lock().await;
        let Some(topic) = self.get(name) else {
            return Err(ApiError::unknown_topic(name, None));
        };
        let mut next = self.snapshot();
        next.remove(name);
        self.persist(next)?;
        self.topics.write().expect("catalog lock").remove(name);
        for partition in &topic.partitions {
            // Requests that looked the partition up before it left the map now answer
            // UNKNOWN_TOPIC_OR_PARTITION instead of failing on the vanishing directory.
            partition.mark_deleted();
            if let Err(error) = remove_partition_dir(&partition.dir) {
                tracing::warn!(dir = %partition.dir.display(), %error, "could not remove a deleted partition's directory");
            }
        }
        Ok(())
    }

    fn snapshot(&self) -> BTreeMap<String, TopicMeta> {
        let topics = self.topics.read().expect("catalog lock");
        topics
            .iter()
            .map(|(n, t)| (n.clone(), t.meta.clone()))
            .collect()
    }

    fn persist(&self, topics: BTreeMap<String, TopicMeta>) -> Result<(), ApiError> {
        let file = CatalogFile { version: 1, topics };
        let bytes = serde_json::to_vec_pretty(&file).expect("catalog serialises");
        write_atomically(&self.path, &bytes).map_err(|e| {
            ApiError::new(
                ErrorKind::KafkaStorageError,
                format!("writing {}: {e}", self.path.display()),
            )
        })
    }
}

fn read_catalog(path: &Path) -> Result<CatalogFile, CatalogError> {
    let corrupt = |reason: String| CatalogError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CatalogFile {
            version: 1,
            topics: BTreeMap::new(),
        }),
        Err(e) => Err(corrupt(e.to_string())),
    }
}

/// Brings a stored topic's numeric configs within Kafka's bounds (see
/// [`crate::config::BOUNDS`]): a topic created before the bounds existed, say with
/// `segment.bytes=1`, opens with the nearest bound instead of keeping the broker from starting.
/// The catalog file takes the new value at its next rewrite.
fn clamp_stored_configs(topic: &str, configs: &mut BTreeMap<String, String>) {
    for (name, value) in configs.iter_mut() {
        if let Some(clamped) = crate::config::clamp_to_bounds(name, value) {
            tracing::warn!(
                "topic {topic}: stored {name}={value} is outside Kafka's bounds; using {clamped}"
            );
            *value = clamped;
        }
    }
}

/// Opens every partition of a topic. A `fresh` topic first clears any leftover directory of the
/// same name, so it can never inherit records of an earlier topic.
fn open_topic(
    config: &Config,
    name: &str,
    mut meta: TopicMeta,
    fresh: bool,
) -> Result<Topic, CatalogError> {
    clamp_stored_configs(name, &mut meta.configs);
    let topic_config = TopicConfig::from_map(&meta.configs).map_err(|e| CatalogError::Corrupt {
        path: config.log_dirs[0].join(CATALOG_FILE),
        reason: format!("topic {name}: {e}"),
    })?;
    let log_config = topic_config.log_config(config);
    let mut partitions = Vec::with_capacity(meta.partitions as usize);
    for index in 0..meta.partitions {
        let dir = partition_dir(config, name, index);
        let log_error = |source| CatalogError::Log {
            topic: name.to_string(),
            partition: index,
            source,
        };
        if fresh && dir.exists() {
            remove_partition_dir(&dir).map_err(|e| log_error(LogError::Io(e)))?;
        }
        let partition = Partition::open(name, index, &dir, log_config.clone(), config.broker_id);
        match partition {
            Ok(partition) => partitions.push(Arc::new(partition)),
            Err(source) => {
                if fresh {
                    for created in &partitions {
                        let _ = remove_partition_dir(&created.dir);
                    }
                }
                return Err(log_error(source));
            }
        }
    }
    Ok(Topic {
        name: name.to_string(),
        meta,
        config: topic_config,
        partitions,
    })
}

/// `<dir>/<topic>-<partition>`: the existing directory in any log dir, else a new one in the
/// log dir chosen by hashing the name (stable, spreads partitions over the dirs).
fn partition_dir(config: &Config, topic: &str, partition: u32) -> PathBuf {
    let name = format!("{topic}-{partition}");
    if let Some(existing) = config
        .log_dirs
        .iter()
        .map(|d| d.join(&name))
        .find(|p| p.exists())
    {
        return existing;
    }
    let hash = name
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    config.log_dirs[(hash % config.log_dirs.len() as u64) as usize].join(name)
}

/// Renames a partition directory out of the way (atomic), then removes it.
fn remove_partition_dir(dir: &Path) -> std::io::Result<()> {
    let doomed = doomed_dir(dir);
    std::fs::rename(dir, &doomed)?;
    std::fs::remove_dir_all(&doomed)
}

/// Where a partition directory `<topic>-<partition>` goes while it is removed:
/// `<topic>-<partition>.<millis>x<sequence>-delete`, unique within the process and over
/// restarts. Like Kafka, the topic is cut short so that the name stays within
/// [`FILE_NAME_LEN_MAX`] bytes: a 249-character topic would otherwise overflow it, the rename
/// would fail and the directory would stay (and block re-creating the topic).
fn doomed_dir(dir: &Path) -> PathBuf {
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let millis = crate::clock::now_ms();
    let sequence = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Topic names are ASCII ([a-zA-Z0-9._-]), so cutting at any byte is safe.
    let (topic, partition) = name.rsplit_once('-').unwrap_or((name.as_str(), ""));
    let suffix = format!("-{partition}.{millis}x{sequence}-delete");
    let keep = topic
        .len()
        .min(FILE_NAME_LEN_MAX.saturating_sub(suffix.len()));
    dir.with_file_name(format!("{}{suffix}", &topic[..keep]))
}

fn remove_deleted_dirs(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().ends_with("-delete") && entry.path().is_dir() {
            tracing::info!(dir = %entry.path().display(), "removing a deleted partition's directory");
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

/// Logs partition directories that no catalog entry accounts for (left by a crash during topic
/// creation). They are kept, not deleted: data is only ever removed on an explicit request.
fn warn_about_stray_dirs(config: &Config, topics: &BTreeMap<String, Arc<Topic>>) {
    let known: std::collections::HashSet<PathBuf> = topics
        .values()
        .flat_map(|t| t.partitions.iter().map(|p| p.dir.clone()))
        .collect();
    for dir in &config.log_dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.path().is_dir() && !known.contains(&entry.path()) {
                tracing::warn!(dir = %entry.path().display(), "directory in a log dir belongs to no topic");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        for good in ["t0", "a.b_c-d", &"x".repeat(249)] {
            assert!(validate_topic_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "sp ace",
            "é",
            &"x".repeat(250),
        ] {
            let error = validate_topic_name(bad).unwrap_err();
            assert_eq!(error.kind, ErrorKind::InvalidTopicException, "{bad}");
        }
    }

    fn config(dir: &Path) -> Config {
        Config {
            log_dirs: vec![dir.to_path_buf()],
            ..Config::default()
        }
    }

    fn meta(partitions: u32) -> TopicMeta {
        TopicMeta {
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }
    }

    #[tokio::test]
    async fn catalog_survives_reopen_and_delete_clears_dirs() {
        let dir = tempfile::tempdir().unwrap();
        {
            let catalog = TopicCatalog::open(&config(dir.path())).unwrap();
            catalog.create("a", meta(2)).await.unwrap();
            catalog.create("b", meta(1)).await.unwrap();
            catalog.delete("b").await.unwrap();
            let again = catalog.create("a", meta(1)).await.unwrap_err();
            assert_eq!(again.kind, ErrorKind::TopicAlreadyExists);
        }
        let catalog = TopicCatalog::open(&config(dir.path())).unwrap();
        let names: Vec<String> = catalog.list().iter().map(|t| t.name.clone()).collect();
        assert_eq!(names, vec!["a".to_string()]);
        assert_eq!(catalog.get("a").unwrap().partitions.len(), 2);
        assert!(dir.path().join("a-1").is_dir());
        assert!(!dir.path().join("b-0").exists());
    }

    #[tokio::test]
    async fn longest_topic_names_create_delete_and_recreate() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = TopicCatalog::open(&config(dir.path())).unwrap();
        let name = "n".repeat(TOPIC_NAME_LEN_MAX);
        for round in 0..3 {
            catalog.create(&name, meta(12)).await.unwrap();
            let partition = catalog.partition(&name, 11).unwrap();
            assert!(partition.dir.is_dir(), "round {round}");
            catalog.delete(&name).await.unwrap();
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .filter(|n| n.to_string_lossy().starts_with('n'))
                .collect();
            assert!(left.is_empty(), "round {round}: {left:?} left behind");
        }
    }

    #[test]
    fn doomed_dir_names_fit_and_are_unique() {
        let dir = Path::new("/logs").join(format!("{}-999", "t".repeat(TOPIC_NAME_LEN_MAX)));
        let first = doomed_dir(&dir);
        let second = doomed_dir(&dir);
        assert_ne!(first, second);
        let name = first.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.len() <= FILE_NAME_LEN_MAX, "{} bytes", name.len());
        assert!(name.starts_with("ttt") && name.contains("-999.") && name.ends_with("-delete"));
        let short = doomed_dir(Path::new("/logs/a-b-3"));
        let short = short.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            short.starts_with("a-b-3.") && short.ends_with("-delete"),
            "{short}"
        );
    }

    #[tokio::test]
    async fn second_catalog_on_the_same_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _first = TopicCatalog::open(&config(dir.path())).unwrap();
        let second = TopicCatalog::open(&config(dir.path()));
        assert!(matches!(second, Err(CatalogError::Dir { .. })));
    }

    #[tokio::test]
    async fn invalid_create_leaves_nothing_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = TopicCatalog::open(&config(dir.path())).unwrap();
        let mut bad = meta(1);
        bad.configs.insert("retention.msec".into(), "1".into());
        assert_eq!(
            catalog.create("c", bad).await.unwrap_err().kind,
            ErrorKind::InvalidConfig
        );
        assert_eq!(
            catalog.create("c", meta(0)).await.unwrap_err().kind,
            ErrorKind::InvalidPartitions
        );
        assert!(!dir.path().join("c-0").exists());
        assert!(!dir.path().join(CATALOG_FILE).exists());
    }
}
