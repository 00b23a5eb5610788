//! `nfce-sample DIR`: writes into DIR the sandbox sale's note issued normally and in
//! contingência, signed as they would be sent, and the certificate that signed them — for
//! checking with tools Pagar did not write (`xmllint --schema`, `xmlsec1 --verify`).

use nfce::{exemplo, Certificado, Emissao};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("uso: nfce-sample DIR");
        return ExitCode::from(2);
    };
    match run(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nfce-sample: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let emitente = exemplo::emitente();
    let cert = Certificado::sandbox(&emitente.cnpj, &emitente.razao_social)?;
    let normal = exemplo::nota(1, Emissao::Normal, false).assinar(&cert)?;
    let contingencia = exemplo::contingencia(2).assinar(&cert)?;
    std::fs::write(dir.join("certificado.pem"), cert.certificate_pem()?)?;
    for (name, nota) in [("normal", &normal), ("contingencia", &contingencia)] {
        let file = dir.join(format!("nfce-{name}.xml"));
        std::fs::write(&file, &nota.xml)?;
        println!(
            "{}: chave {}, QR Code {}",
            file.display(),
            nota.chave,
            nota.qrcode
        );
    }
    Ok(())
}
