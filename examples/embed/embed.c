/* examples/embed/embed.c — embedding tfvm in a C program: load a program,
 * make a VM, run an entry point with a scalar argument, read the result.
 *
 *   cc embed.c $(pkg-config --cflags --libs tfvm) -o embed
 *   ./embed fib.tfvm 20        -> fib(20) = 10946
 */
#include <stdio.h>
#include <stdlib.h>

#include <tfvm.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PROGRAM.tfvm N\n", argv[0]);
        return 2;
    }
    tfvm_error err;
    tfvm_program *prog;
    if (tfvm_program_load_file(argv[1], NULL, &prog, &err) != TFVM_OK) {
        fprintf(stderr, "embed: %s\n", err.message);
        return 1;
    }
    tfvm_vm *vm;
    if (tfvm_vm_new(prog, NULL, &vm) != TFVM_OK) {
        fprintf(stderr, "embed: out of memory\n");
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
