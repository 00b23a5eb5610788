//! One till in a randomized trial ([`pagar_e2e::trial_client`]).

fn main() -> std::process::ExitCode {
    pagar_e2e::trial_client::run()
}
