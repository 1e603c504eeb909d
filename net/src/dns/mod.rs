//! DNS: an I/O-free message codec ([`wire`]), the parsers of `/etc/resolv.conf` and
//! `/etc/hosts` ([`conf`], [`hosts`]; pure functions over strings), and a blocking
//! stub resolver over UDP and TCP ([`Resolver`]).

pub mod conf;
pub mod hosts;
pub(crate) mod resolver;
pub mod wire;

pub use conf::ResolvConf;
pub use hosts::Hosts;
pub use resolver::{
    Answer, Lookup, QueryOptions, Resolver, Source, DEFAULT_MAX_TTL, MAX_CNAME_CHAIN,
};
