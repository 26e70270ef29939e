//! Prints the API's OpenAPI document, as `GET /openapi.json` serves it:
//! `cargo run -p weft-server --bin openapi > docs/openapi.json`.

fn main() {
    let document = weft_server::openapi_document();
    match serde_json::to_string_pretty(&document) {
        Ok(text) => println!("{text}"),
        Err(error) => {
            eprintln!("error: cannot write the document: {error}");
            std::process::exit(1);
        }
    }
}
