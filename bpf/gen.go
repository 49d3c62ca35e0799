package bpf

//go:generate go tool bpf2go -tags linux -cc clang -target bpfel -type idle_gate -type rx_key -type rx_limit -type lane_rtt Lanes lanes.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -cc clang -target bpfel -type disk_event Diskidle diskidle.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -cc clang -target bpfel -no-global-types Ledbat ledbat.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -cc clang -target bpfel -no-global-types Sockmark sockmark.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -cc clang -target bpfel -no-global-types Rledbat rledbat.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -cc clang -target bpfel Delivery delivery.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -cc clang -target bpfel -type pw_event -type exe_id Procwatch procwatch.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -cc clang -target bpfel Procsettle procsettle.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -cc clang -target bpfel Proccount proccount.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
