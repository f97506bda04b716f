//! Shrinking a schedule that reproduces a finding: delta debugging (Zeller's ddmin) over its
//! faults, then each remaining fault narrowed one step at a time while it still reproduces.
//! Pure logic over a [`Judge`]: the hunt's judge re-runs the workload, a test's is a predicate.

use std::future::Future;

/// Says whether a schedule still reproduces the finding being shrunk.
pub trait Judge<T> {
    /// Whether `faults` reproduce it (for the hunt: in k of k runs).
    fn reproduces(&mut self, faults: &[T]) -> impl Future<Output = bool>;
}

/// A shrunk schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Shrunk<T> {
    /// The smallest schedule found that reproduces.
    pub faults: Vec<T>,
    /// Candidates judged.
    pub tried: usize,
}

/// Shrinks `faults` (which reproduce) with at most `max_tries` candidates judged: first drops
/// faults (ddmin: the complement of each of n chunks, n doubling from 2 up to one a chunk),
/// then replaces each remaining fault by the first of its `simpler` forms that still
/// reproduces, again, until none does. `simpler` must make progress (a form is simpler by a
/// measure that cannot fall forever), or the budget ends it.
pub async fn shrink<T: Clone>(
    faults: Vec<T>,
    simpler: impl Fn(&T) -> Vec<T>,
    judge: &mut impl Judge<T>,
    max_tries: usize,
) -> Shrunk<T> {
    let mut tried = 0;
    let mut current = faults;
    let mut chunks = 2;
    while current.len() >= 2 && tried < max_tries {
        let size = current.len().div_ceil(chunks);
        let mut reduced = false;
        for start in (0..current.len()).step_by(size) {
            if tried >= max_tries {
                break;
            }
            let complement: Vec<T> = current[..start]
                .iter()
                .chain(current[(start + size).min(current.len())..].iter())
                .cloned()
                .collect();
            tried += 1;
            if judge.reproduces(&complement).await {
                current = complement;
                chunks = (chunks - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if chunks >= current.len() {
                break;
            }
            chunks = (chunks * 2).min(current.len());
        }
    }
    for i in 0..current.len() {
        'narrow: loop {
            for candidate in simpler(&current[i]) {
                if tried >= max_tries {
                    break 'narrow;
                }
                let mut next = current.clone();
                next[i] = candidate;
                tried += 1;
                if judge.reproduces(&next).await {
                    current = next;
                    continue 'narrow;
                }
            }
            break;
        }
    }
    Shrunk {
        faults: current,
        tried,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake judge: a predicate over schedules, counting its calls.
    struct Predicate<F>(F, usize);

    impl<T, F: Fn(&[T]) -> bool> Judge<T> for Predicate<F> {
        async fn reproduces(&mut self, faults: &[T]) -> bool {
            self.1 += 1;
            (self.0)(faults)
        }
    }

    /// Faults as (name, delay ms); simpler: the delay halved.
    fn halve(f: &(char, u32)) -> Vec<(char, u32)> {
        if f.1 >= 2 {
            vec![(f.0, f.1 / 2)]
        } else {
            vec![]
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn drops_every_fault_the_finding_does_not_need_and_narrows_the_rest() {
        // Reproduces when b is there with a delay of at least 5 and d is there at all.
        let needs = |s: &[(char, u32)]| {
            s.iter().any(|f| f.0 == 'b' && f.1 >= 5) && s.iter().any(|f| f.0 == 'd')
        };
        let mut judge = Predicate(needs, 0);
        let start = vec![('a', 8), ('b', 40), ('c', 3), ('d', 16), ('e', 1)];
        let shrunk = block_on(shrink(start, halve, &mut judge, 100));
        // b: 40 → 20 → 10 → 5 (2 fails); d: 16 → 8 → 4 → 2 → 1.
        assert_eq!(shrunk.faults, vec![('b', 5), ('d', 1)]);
        assert_eq!(shrunk.tried, judge.1);
    }

    #[test]
    fn a_single_fault_is_only_narrowed_and_a_needed_pair_is_kept() {
        let mut judge = Predicate(|s: &[(char, u32)]| s.len() == 2, 0);
        let shrunk = block_on(shrink(vec![('x', 1), ('y', 1)], halve, &mut judge, 100));
        assert_eq!(shrunk.faults, vec![('x', 1), ('y', 1)]);
        // Two complements tried, nothing to narrow.
        assert_eq!(shrunk.tried, 2);
        let mut judge = Predicate(|s: &[(char, u32)]| s.iter().any(|f| f.1 >= 3), 0);
        let shrunk = block_on(shrink(vec![('x', 12)], halve, &mut judge, 100));
        assert_eq!(shrunk.faults, vec![('x', 3)]);
        // 6 and 3 kept, 1 refused.
        assert_eq!(shrunk.tried, 3);
    }

    #[test]
    fn the_budget_bounds_the_candidates_judged() {
        let mut judge = Predicate(|_: &[(char, u32)]| true, 0);
        let start: Vec<(char, u32)> = ('a'..='h').map(|c| (c, 1 << 20)).collect();
        let shrunk = block_on(shrink(start, halve, &mut judge, 7));
        assert_eq!((shrunk.tried, judge.1), (7, 7));
        assert!(!shrunk.faults.is_empty());
    }
}
