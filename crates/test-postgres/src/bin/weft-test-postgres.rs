//! `weft-test-postgres`: starts a throwaway PostgreSQL server, prints the URL of a new empty
//! database on its first line, and keeps the server until this process is killed (the server
//! then stops and its files go). For tests outside Rust: the app's end-to-end tests on PostgreSQL.

fn main() {
    let server = match weft_test_postgres::PostgresServer::start() {
        Ok(server) => server,
        Err(error) => {
            eprintln!("weft-test-postgres: {error}");
            std::process::exit(1);
        }
    };
    println!("{}", server.new_database());
    loop {
        std::thread::park();
    }
}
