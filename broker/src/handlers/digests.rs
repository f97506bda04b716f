//! The record digests of one Produce request's batches as its handler hands them to the
//! journal ([`Digests`]): the first partition's held inline, so that the common request of
//! one partition allocates no list for them.

use crate::state::batch::BatchDigests;

/// The record digests of each partition's batch of one Produce request, in request order:
/// computed, deferred to the journal, or absent. Empty for any other request (and with the
/// journal off).
#[derive(Debug, Default)]
pub struct Digests {
    /// The first partition's.
    first: Option<BatchDigests>,
    /// The other partitions', in request order (no allocation while empty).
    rest: Vec<BatchDigests>,
}

impl Digests {
    /// No digests.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether there are none (not a Produce, or the journal off).
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The digests of the `i`th partition in request order, if there is one.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut BatchDigests> {
        match i.checked_sub(1) {
            None => self.first.as_mut(),
            Some(i) => self.rest.get_mut(i),
        }
    }
}

impl FromIterator<BatchDigests> for Digests {
    fn from_iter<I: IntoIterator<Item = BatchDigests>>(iter: I) -> Self {
        let mut iter = iter.into_iter();
        Self {
            first: iter.next(),
            rest: iter.collect(),
        }
    }
}

impl IntoIterator for Digests {
    type Item = BatchDigests;
    type IntoIter =
        std::iter::Chain<std::option::IntoIter<BatchDigests>, std::vec::IntoIter<BatchDigests>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn computed(n: u64) -> BatchDigests {
        BatchDigests::Computed(vec![crate::state::batch::RecordDigest(n)])
    }

    #[test]
    fn digests_keep_request_order_whatever_their_number() {
        for n in 0..4 {
            let mut digests: Digests = (0..n).map(computed).collect();
            assert_eq!(digests.is_empty(), n == 0);
            for i in 0..n {
                assert_eq!(digests.get_mut(i as usize), Some(&mut computed(i)));
            }
            assert_eq!(digests.get_mut(n as usize), None);
            let back: Vec<_> = digests.into_iter().collect();
            assert_eq!(back, (0..n).map(computed).collect::<Vec<_>>());
        }
    }
}
