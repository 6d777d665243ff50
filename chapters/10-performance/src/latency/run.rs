//! The program: find or start the servers, build the arms, measure them
//! interleaved, print what they say, and keep every sample.

use anyhow::Context;

use super::{Args, Servers, arms, floor_arm, measure, report, rest_body, write_csv};

/// The program: set up the arms, measure, print, write the CSV.
pub async fn run(args: Args) -> anyhow::Result<()> {
    // Before measuring: a plot that cannot be written fails at once.
    let plot = args.plot.as_deref().map(crate::plot::create).transpose()?;
    let ca = args.ca.clone().unwrap_or_else(program::default_ca);
    // Keep the in-process stack alive for the whole run.
    let (_stack, servers, placement) = if args.spawn {
        let (stack, servers) = Servers::spawn_stack(&program::certs_dir(), ca).await?;
        let placement = format!(
            "client and servers in this one process (--spawn: gRPC :{}, REST :{}), sharing one Tokio runtime",
            stack.grpc_addr.port(),
            stack.rest_addr.port()
        );
        (Some(stack), servers, placement)
    } else {
        let servers = Servers::new(args.grpc.clone(), args.rest.clone(), ca)?;
        let placement = format!(
            "client in this process, servers in another ({} and {})",
            servers.grpc_url, servers.rest_url
        );
        (None, servers, placement)
    };
    let mut arms = arms(&servers, args.fresh_connections).await?;
    if args.floor {
        // The same number of bytes as the REST request, each way.
        arms.push(floor_arm(rest_body().len()).await?);
    }

    report::print_plan(&args, &placement);
    let samples = measure(
        &arms,
        args.warmup,
        args.calls,
        args.repeat,
        |round, done, of| {
            eprintln!(
                "  ... round {round}/{}: {done}/{of} calls per arm",
                args.repeat
            )
        },
    )
    .await?;

    report::print_arms(&arms, &samples, args.floor);
    if args.repeat > 1 {
        report::print_rounds(&arms, &samples);
    }
    report::print_handshakes(&arms);
    if let Some(path) = &args.csv {
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        write_csv(&mut file, &arms, &samples)?;
        std::io::Write::flush(&mut file)?;
        println!();
        println!("every sample written to {}", path.display());
    }
    if let (Some(file), Some(path)) = (plot, &args.plot) {
        report::plot(file, path, &args, &arms, &samples)?;
        println!();
        println!("plot: {}", path.display());
    }
    Ok(())
}
