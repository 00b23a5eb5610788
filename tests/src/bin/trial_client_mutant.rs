//! One till in a randomized trial ([`pagar_e2e::trial_client`]) whose engine commits its
//! write-ahead relaxed (the `mutant` feature): the power-cut trials must catch it.

fn main() -> std::process::ExitCode {
    pagar_e2e::trial_client::run()
}
