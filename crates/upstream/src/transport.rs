//! The upstream HTTP transport: the pools of every upstream, built over one
//! [`Connector`]. Every upstream request of every
//! side goes through a [`Pool`] from [`Transport::pool`].

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use crate::connect::Connector;
use crate::counters::Counters;
use crate::error::UpstreamError;
use crate::offline::Switch;
use crate::pool::{Pool, PoolReport, Shared};
use crate::PoolSettings;

/// A pool's name and instance URLs: what makes it the same pool.
type PoolKey = (String, Vec<String>);

/// The pools of every upstream.
#[derive(Debug, Clone)]
pub struct Transport {
    shared: Arc<Shared>,
    pools: Arc<Mutex<HashMap<PoolKey, Arc<Pool>>>>,
}

impl Transport {
    pub(crate) fn new(connector: Connector, settings: PoolSettings, switch: Switch, counters: Arc<Counters>) -> Self {
        Transport { shared: Arc::new(Shared::new(connector, settings, switch, counters)), pools: Arc::default() }
    }

    /// The pool named `name` over the instances `urls` (base URLs, in the
    /// configured order), made on first use. One pool per name and instance
    /// list lives as long as the transport, keeping its instances' state.
    pub fn pool(&self, name: &str, urls: &[String]) -> Result<Arc<Pool>, UpstreamError> {
        let key = (name.to_string(), urls.to_vec());
        let mut pools = self.pools.lock();
        if let Some(pool) = pools.get(&key) {
            return Ok(Arc::clone(pool));
        }
        let pool = Arc::new(Pool::new(name, urls, Arc::clone(&self.shared))?);
        pools.insert(key, Arc::clone(&pool));
        Ok(pool)
    }

    /// Lets go of every pool (a reload): requests under way keep theirs,
    /// new ones make new pools over the instances configured now, whose
    /// health is learnt afresh, as after a restart.
    pub fn forget_pools(&self) {
        self.pools.lock().clear();
    }

    /// Every pool's state, by name.
    pub fn report(&self) -> Vec<PoolReport> {
        let pools: Vec<Arc<Pool>> = self.pools.lock().values().cloned().collect();
        let mut reports: Vec<PoolReport> = pools.iter().map(|pool| pool.report()).collect();
        reports.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.instances.len().cmp(&b.instances.len())));
        reports
    }
}
