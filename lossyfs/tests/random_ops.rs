//! Random operations in one directory through a real mount, checked against a small reference
//! model of what each fsync makes durable: after every loss (clean or torn) the view must equal
//! the model's durable state, and between losses its volatile state. One seed drives each run; a failure
//! names the seed and the step.

mod common;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::{fsync_dir, mount, names, Mounted};
use tidewater_lossyfs::state::torn_prefix_len;
use tidewater_lossyfs::Mode;

/// splitmix64: small, deterministic, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One file of the reference model.
#[derive(Clone, Default)]
struct RefFile {
    volatile: Vec<u8>,
    durable: Vec<u8>,
    /// The last write since the last fsync, while nothing else changed the file after it.
    last_write: Option<(usize, Vec<u8>)>,
}

/// What the view should show and what should survive, in one directory.
#[derive(Default)]
struct Reference {
    files: BTreeMap<u64, RefFile>,
    volatile_names: BTreeMap<String, u64>,
    durable_names: BTreeMap<String, u64>,
    next_id: u64,
}

impl Reference {
    fn view(&self, durable: bool) -> BTreeMap<String, Vec<u8>> {
        let names = if durable {
            &self.durable_names
        } else {
            &self.volatile_names
        };
        names
            .iter()
            .map(|(name, id)| {
                let file = &self.files[id];
                let bytes = if durable {
                    &file.durable
                } else {
                    &file.volatile
                };
                (name.clone(), bytes.clone())
            })
            .collect()
    }

    /// A torn loss: each durably named file keeps a prefix of its last unsynced write.
    fn lose_torn(&mut self, seed: u64) {
        for (name, id) in &self.durable_names {
            let file = self.files.get_mut(id).unwrap();
            let Some((offset, data)) = &file.last_write else {
                continue;
            };
            let kept = torn_prefix_len(seed, Path::new(name), data.len() as u64) as usize;
            if kept > 0 {
                if file.durable.len() < offset + kept {
                    file.durable.resize(offset + kept, 0);
                }
                file.durable[*offset..offset + kept].copy_from_slice(&data[..kept]);
            }
        }
        self.lose();
    }

    /// A file that lost its last name (and is not open) drops its unsynced changes.
    fn unreachable(&mut self, id: u64) {
        if !self.volatile_names.values().any(|&v| v == id) {
            self.files.get_mut(&id).unwrap().last_write = None;
        }
    }

    fn lose(&mut self) {
        self.volatile_names = self.durable_names.clone();
        let live: Vec<u64> = self.durable_names.values().copied().collect();
        self.files.retain(|id, _| live.contains(id));
        for file in self.files.values_mut() {
            file.volatile = file.durable.clone();
            file.last_write = None;
        }
    }
}

/// Panics with the first difference between two views, named by `context`.
fn assert_same(
    actual: &BTreeMap<String, Vec<u8>>,
    wanted: &BTreeMap<String, Vec<u8>>,
    context: &str,
) {
    let actual_names: Vec<&String> = actual.keys().collect();
    let wanted_names: Vec<&String> = wanted.keys().collect();
    assert_eq!(actual_names, wanted_names, "{context}: names");
    for (name, bytes) in actual {
        let expected = &wanted[name];
        let first_difference = bytes.iter().zip(expected).position(|(a, b)| a != b);
        assert!(
            bytes.len() == expected.len() && first_difference.is_none(),
            "{context}: file {name} has {} bytes, wanted {}; first differing byte at {:?}",
            bytes.len(),
            expected.len(),
            first_difference
        );
    }
}

fn actual_view(m: &Mounted) -> BTreeMap<String, Vec<u8>> {
    names(&m.mnt)
        .into_iter()
        .map(|name| {
            let bytes = fs::read(m.mnt.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];

/// Runs `steps` random operations; returns how many writes torn losses kept part of.
fn run(seed: u64, steps: usize) -> usize {
    let mut torn_kept = 0;
    let m = mount(|_| {});
    let mut rng = Rng(seed);
    let mut reference = Reference::default();
    for step in 0..steps {
        let name = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
        let path = m.mnt.join(&name);
        let existing = reference.volatile_names.get(&name).copied();
        let what = rng.below(100);
        match (what, existing) {
            (0..=14, None) => {
                File::create(&path).unwrap();
                let id = reference.next_id;
                reference.next_id += 1;
                reference.files.insert(id, RefFile::default());
                reference.volatile_names.insert(name, id);
            }
            (0..=34, Some(id)) => {
                let file = reference.files.get_mut(&id).unwrap();
                let len = file.volatile.len() as u64;
                let offset = rng.below(len + 200) as usize;
                let data: Vec<u8> = (0..1 + rng.below(6000)).map(|_| rng.next() as u8).collect();
                OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .write_all_at(&data, offset as u64)
                    .unwrap();
                if file.volatile.len() < offset + data.len() {
                    file.volatile.resize(offset + data.len(), 0);
                }
                file.volatile[offset..offset + data.len()].copy_from_slice(&data);
                file.last_write = Some((offset, data));
            }
            (35..=44, Some(id)) => {
                let file = reference.files.get_mut(&id).unwrap();
                let len = rng.below(file.volatile.len() as u64 + 9000);
                OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(len)
                    .unwrap();
                if len as usize != file.volatile.len() {
                    file.last_write = None;
                }
                file.volatile.resize(len as usize, 0);
            }
            (45..=59, Some(id)) => {
                OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .sync_data()
                    .unwrap();
                let file = reference.files.get_mut(&id).unwrap();
                file.durable = file.volatile.clone();
                file.last_write = None;
            }
            (60..=69, Some(id)) => {
                let to = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
                fs::rename(&path, m.mnt.join(&to)).unwrap();
                reference.volatile_names.remove(&name);
                if let Some(replaced) = reference.volatile_names.insert(to, id) {
                    reference.unreachable(replaced);
                }
            }
            (70..=76, Some(id)) => {
                fs::remove_file(&path).unwrap();
                reference.volatile_names.remove(&name);
                reference.unreachable(id);
            }
            (77..=91, _) => {
                fsync_dir(&m.mnt);
                reference.durable_names = reference.volatile_names.clone();
            }
            (92..=93, _) => {
                m.handle.lose_unsynced(Mode::Clean).unwrap();
                reference.lose();
                let context = format!("seed {seed} step {step}: after a loss");
                assert_same(&actual_view(&m), &reference.view(true), &context);
            }
            (94..=95, _) => {
                let torn_seed = rng.next();
                let report = m
                    .handle
                    .lose_unsynced(Mode::Torn { seed: torn_seed })
                    .unwrap();
                torn_kept += report.torn_writes.iter().filter(|t| t.kept > 0).count();
                reference.lose_torn(torn_seed);
                let context = format!("seed {seed} step {step}: after a torn loss");
                assert_same(&actual_view(&m), &reference.view(true), &context);
            }
            _ => {}
        }
        if step % 10 == 0 {
            let context = format!("seed {seed} step {step}: the volatile view");
            assert_same(&actual_view(&m), &reference.view(false), &context);
        }
    }
    m.handle.lose_unsynced(Mode::Clean).unwrap();
    reference.lose();
    let context = format!("seed {seed}: at the end");
    assert_same(&actual_view(&m), &reference.view(true), &context);
    torn_kept
}

#[test]
fn random_operations_lose_exactly_what_the_reference_model_says() {
    let torn_kept: usize = (1..=40).map(|seed| run(seed, 400)).sum();
    assert!(
        torn_kept >= 20,
        "torn losses kept parts of {torn_kept} writes"
    );
}
