//! `Server::bind` refuses a configuration it cannot serve with, with a typed error that
//! names the setting, before it binds anything.

#[test]
fn bind_refuses_keepalive_settings_linux_does_not_take() {
    let mut config = keel_server::Config::new("127.0.0.1:0".parse().unwrap());
    config.workers = 1;
    let ok = config.tcp_keepalive.expect("on by default");
    config.tcp_keepalive = Some(keel_server::TcpKeepalive { count: 0, ..ok });
    match keel_server::Server::bind(config) {
        Err(keel_server::Error::Config {
            setting,
            value,
            expected,
        }) => {
            assert_eq!(
                (setting.as_str(), value.as_str()),
                ("tcp_keepalive.count", "0")
            );
            assert_eq!(expected, "from 1 to 127");
        }
        other => panic!("{:?}", other.map(|s| s.local_addr())),
    }
}
