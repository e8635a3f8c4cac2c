/* examples/embed/embed.c — embedding tfvm in a C program: check the library's
 * version, load a program (any format: .tfvm, .tfasm, .tfg, .onnx, .pb), make
 * a VM, run an entry point with a scalar argument, read the result.
 *
 *   cc embed.c $(pkg-config --cflags --libs tfvm) -o embed
 *   ./embed fib.tfvm 20        -> fib(20) = 10946
 *   TFVM_DEVICE=cuda ./embed fib.tfvm 20   (the VM on the GPU: says why not)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfvm.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PROGRAM.tfvm N\n", argv[0]);
        return 2;
    }
    if (!TFVM_VERSION_OK()) { /* the libtfvm.so found at run time is not the one built against */
        fprintf(stderr, "embed: built for libtfvm %s, but %s is loaded\n", TFVM_VERSION_STRING, tfvm_version());
        return 1;
    }
    tfvm_error err;
    tfvm_program *prog;
    if (tfvm_program_load_file(argv[1], NULL, &prog, &err) != TFVM_OK) {
        fprintf(stderr, "embed: %s\n", err.message);
        return 1;
    }
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    const char *dev = getenv("TFVM_DEVICE");
    if (dev && strcmp(dev, "cuda") == 0)
        cfg.device = TFVM_DEVICE_CUDA;
    tfvm_vm *vm;
    if (tfvm_vm_new_ex(prog, &cfg, &vm, &err) != TFVM_OK) {
        fprintf(stderr, "embed: %s\n", err.message);
        tfvm_program_free(prog);
        return 1;
    }
    tfvm_value arg = tfvm_i32(atoi(argv[2])), result;
    int rc = 0;
    if (tfvm_run(vm, "main", &arg, 1, &result, 1) != TFVM_OK) {
        fprintf(stderr, "embed: %s\n", tfvm_errmsg(vm));
        rc = 1;
    } else {
        printf("fib(%d) = %d\n", arg.as.i32, result.as.i32);
    }
    tfvm_vm_free(vm);
    tfvm_program_free(prog);
    return rc;
}
