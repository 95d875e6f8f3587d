//! One command on every host at once: hosts are independent, so a slow one must not delay
//! the rest.

use crate::cluster::{Error, Result};

/// Runs `f` for every node at once (hosts are independent; a slow one must not delay the
/// rest), returning each node's result in the order given.
pub(super) fn on_each<T: Send>(
    nodes: &[String],
    f: impl Fn(&str) -> Result<T> + Sync,
) -> Vec<(String, Result<T>)> {
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = nodes
            .iter()
            .map(|n| (n.clone(), s.spawn(move || f(n))))
            .collect();
        handles
            .into_iter()
            .map(|(n, h)| {
                let result = h
                    .join()
                    .unwrap_or_else(|_| Err(Error::State(format!("the thread for {n} panicked"))));
                (n, result)
            })
            .collect()
    })
}

/// The first error of `on_each`'s results, naming its node.
pub(super) fn first_error<T>(results: Vec<(String, Result<T>)>, what: &str) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(results.len());
    for (node, r) in results {
        out.push(r.map_err(|e| Error::State(format!("{what} on {node}: {e}")))?);
    }
    Ok(out)
}
