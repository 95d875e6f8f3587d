//! Delta debugging (Zeller and Hildebrandt's ddmin): the smallest subset of a failing input
//! that still fails, found by testing ever finer chunks and their complements. Pure: the test
//! is a function, so the search is checked here with made-up failures.

/// What testing a subset found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// It still fails; the items given are what was really tested (the subset, or a smaller
    /// one when some of its items could not stand without others).
    Fails(Vec<T>),
    /// It passes, or it could not be tested (nothing left to run, no budget left).
    Passes,
}

/// The test of one subset: what it found, or an error that ends the search.
pub type Test<'a, T, E> = dyn FnMut(&[T]) -> Result<Outcome<T>, E> + 'a;

/// The 1-minimal failing subset of `items` (which must fail as a whole) under `test`: no
/// single chunk of the last granularity can be removed without the failure going away. An
/// error from `test` ends the search at once.
pub fn ddmin<T: Clone + PartialEq, E>(
    items: Vec<T>,
    test: &mut Test<'_, T, E>,
) -> Result<Vec<T>, E> {
    let mut current = items;
    let mut granularity = 2;
    while current.len() >= 2 {
        let chunks = split(&current, granularity);
        if let Some(smaller) = first_failing(&chunks, test)? {
            (current, granularity) = (smaller, 2);
            continue;
        }
        // With two chunks, each complement is the other chunk, already tested.
        if granularity > 2 {
            let complements: Vec<Vec<T>> = (0..chunks.len())
                .map(|i| without_chunk(&chunks, i))
                .collect();
            if let Some(smaller) = first_failing(&complements, test)? {
                granularity = (granularity - 1).max(2);
                current = smaller;
                continue;
            }
        }
        if granularity >= current.len() {
            break;
        }
        granularity = (granularity * 2).min(current.len());
    }
    Ok(current)
}

/// The first of `subsets` that fails, as the test really ran it.
fn first_failing<T: Clone, E>(
    subsets: &[Vec<T>],
    test: &mut Test<'_, T, E>,
) -> Result<Option<Vec<T>>, E> {
    for subset in subsets {
        if let Outcome::Fails(tested) = test(subset)? {
            return Ok(Some(tested));
        }
    }
    Ok(None)
}

/// `items` in `n` chunks of nearly equal length, in order.
fn split<T: Clone>(items: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.clamp(1, items.len().max(1));
    let mut chunks = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let end = start + (items.len() - start) / (n - i);
        chunks.push(items[start..end].to_vec());
        start = end;
    }
    debug_assert_eq!(start, items.len());
    chunks
}

/// Every chunk but chunk `skip`, concatenated in order.
fn without_chunk<T: Clone>(chunks: &[Vec<T>], skip: usize) -> Vec<T> {
    chunks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != skip)
        .flat_map(|(_, c)| c.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    /// ddmin with a test that fails when every item of `needed` is present; returns the
    /// result and how many subsets were tested.
    fn search(len: usize, needed: &[usize]) -> (Vec<usize>, usize) {
        let mut tests = 0;
        let result = ddmin::<usize, Infallible>((0..len).collect(), &mut |subset| {
            tests += 1;
            Ok(if needed.iter().all(|n| subset.contains(n)) {
                Outcome::Fails(subset.to_vec())
            } else {
                Outcome::Passes
            })
        })
        .unwrap();
        (result, tests)
    }

    #[test]
    fn finds_the_items_the_failure_needs() {
        assert_eq!(search(8, &[3]).0, vec![3]);
        assert_eq!(search(7, &[0, 2, 3, 4, 5]).0, vec![0, 2, 3, 4, 5]);
        assert_eq!(search(16, &[1, 14]).0, vec![1, 14]);
        assert_eq!(search(1, &[0]).0, vec![0]);
        let (all, _) = search(5, &[0, 1, 2, 3, 4]);
        assert_eq!(all, vec![0, 1, 2, 3, 4], "nothing can go");
    }

    #[test]
    fn one_needed_item_among_many_takes_logarithmically_many_tests() {
        let (result, tests) = search(64, &[37]);
        assert_eq!(result, vec![37]);
        assert!(tests <= 2 * 6, "{tests} tests for 64 items");
    }

    #[test]
    fn a_test_that_tested_less_than_asked_moves_the_search_there() {
        // Item 1 cannot stand without item 0: a subset holding 1 but not 0 is tested without 1.
        let result = ddmin::<usize, Infallible>((0..6).collect(), &mut |subset| {
            let tested: Vec<usize> = subset
                .iter()
                .copied()
                .filter(|&i| i != 1 || subset.contains(&0))
                .collect();
            Ok(if tested.contains(&4) {
                Outcome::Fails(tested)
            } else {
                Outcome::Passes
            })
        })
        .unwrap();
        assert_eq!(result, vec![4]);
    }

    #[test]
    fn an_error_ends_the_search() {
        let mut tests = 0;
        let e = ddmin::<usize, String>((0..8).collect(), &mut |_| {
            tests += 1;
            Err("setup failed".into())
        })
        .unwrap_err();
        assert_eq!((e.as_str(), tests), ("setup failed", 1));
    }

    #[test]
    fn chunks_cover_the_items_in_order() {
        assert_eq!(split(&[1, 2, 3, 4, 5], 2), vec![vec![1, 2], vec![3, 4, 5]]);
        assert_eq!(split(&[1, 2, 3], 3), vec![vec![1], vec![2], vec![3]]);
        assert_eq!(without_chunk(&split(&[1, 2, 3, 4], 4), 1), vec![1, 3, 4]);
    }
}
