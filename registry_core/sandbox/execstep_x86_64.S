# The exec step for x86-64 Linux: a static, libc-free program.
#   execstep SELF_FD STATUS_FD RULESET_FD N [MASK PATH]... TOOL [ARG...]
# close(SELF_FD) (the sealed memfd this program was started from, if >= 0);
# prctl(PR_SET_NO_NEW_PRIVS); when RULESET_FD >= 0: add N path rules
# (MASK decimal, PATH opened O_PATH; a missing PATH is skipped), restrict
# self, close the ruleset; write "1" to STATUS_FD, close it; execve TOOL
# with the same environment.  Any failure before execve: exit 125.
        .intel_syntax noprefix
        .globl _start
        .text
_start:
        mov     r12, rsp                # r12 -> argc
        mov     rax, [r12]
        lea     r15, [r12 + 16 + rax*8] # r15 = envp (argv + argc + 1)
        mov     eax, 157                # prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        mov     edi, 38
        mov     esi, 1
        xor     edx, edx
        xor     r10d, r10d
        xor     r8d, r8d
        syscall
        test    rax, rax
        jnz     fail
        cmp     qword ptr [r12], 5      # at least SELF STATUS RULESET N
        jb      fail
        mov     rsi, [r12 + 16]         # argv[1]: this program's memfd (-1: none)
        call    atoi
        test    rax, rax
        js      0f
        mov     rdi, rax
        mov     eax, 3                  # close(SELF_FD)
        syscall
0:      mov     rsi, [r12 + 24]         # argv[2]: status fd
        call    atoi
        mov     r13, rax
        mov     rsi, [r12 + 32]         # argv[3]: ruleset fd (-1: none)
        call    atoi
        mov     r14, rax
        mov     rsi, [r12 + 40]         # argv[4]: N
        call    atoi
        mov     rbx, rax                # rules left
        lea     rbp, [r12 + 48]         # rbp -> argv[5]
        sub     rsp, 16                 # struct landlock_path_beneath_attr (packed, 12 bytes)
rules:
        test    rbx, rbx
        jz      restrict
        mov     rsi, [rbp]              # MASK
        test    rsi, rsi
        jz      fail
        call    atoi
        mov     [rsp], rax
        mov     rdi, [rbp + 8]          # PATH
        test    rdi, rdi
        jz      fail
        add     rbp, 16
        dec     rbx
        test    r14, r14
        js      rules                   # no Landlock: nothing to add
        mov     eax, 2                  # open(PATH, O_PATH | O_CLOEXEC)
        mov     esi, 0x280000
        xor     edx, edx
        syscall
        cmp     rax, -2                 # ENOENT: skipped
        je      rules
        test    rax, rax
        js      fail
        mov     [rsp + 8], eax
        mov     r9, rax
        mov     eax, 445                # landlock_add_rule(ruleset, PATH_BENEATH, &attr, 0)
        mov     rdi, r14
        mov     esi, 1
        mov     rdx, rsp
        xor     r10d, r10d
        syscall
        test    rax, rax
        jnz     fail
        mov     eax, 3                  # close(path fd)
        mov     rdi, r9
        syscall
        jmp     rules
restrict:
        test    r14, r14
        js      status
        mov     eax, 446                # landlock_restrict_self(ruleset, 0)
        mov     rdi, r14
        xor     esi, esi
        syscall
        test    rax, rax
        jnz     fail
        mov     eax, 3                  # close(ruleset)
        mov     rdi, r14
        syscall
status:
        mov     eax, 1                  # write(status, "1", 1)
        mov     rdi, r13
        lea     rsi, [rip + one]
        mov     edx, 1
        syscall
        cmp     rax, 1
        jne     fail
        mov     eax, 3                  # close(status)
        mov     rdi, r13
        syscall
        mov     rdi, [rbp]              # TOOL
        test    rdi, rdi
        jz      fail
        mov     eax, 59                 # execve(TOOL, &argv[TOOL], envp)
        mov     rsi, rbp
        mov     rdx, r15
        syscall
        mov     edi, 126                # exec failed: 127 when missing, else 126
        cmp     rax, -2
        jne     1f
        mov     edi, 127
1:      push    rdi
        mov     eax, 1
        mov     edi, 2
        lea     rsi, [rip + execmsg]
        mov     edx, offset execlen
        syscall
        pop     rdi
        jmp     exit
fail:
        mov     eax, 1
        mov     edi, 2
        lea     rsi, [rip + failmsg]
        mov     edx, offset faillen
        syscall
        mov     edi, 125
exit:
        mov     eax, 231                # exit_group
        syscall

# atoi: rsi -> decimal string with optional '-', result in rax (garbage -> fail).
atoi:
        xor     eax, eax
        xor     ecx, ecx                # negative?
        cmp     byte ptr [rsi], '-'
        jne     2f
        inc     ecx
        inc     rsi
2:      movzx   edx, byte ptr [rsi]
        test    edx, edx
        jz      3f
        sub     edx, '0'
        cmp     edx, 9
        ja      fail
        imul    rax, rax, 10
        add     rax, rdx
        inc     rsi
        jmp     2b
3:      test    ecx, ecx
        jz      4f
        neg     rax
4:      ret

        .section .rodata
one:    .ascii "1"
failmsg: .ascii "ollie sandbox: cannot apply the sandbox (exec step)\n"
        .set faillen, . - failmsg
execmsg: .ascii "ollie sandbox: cannot execute the tool\n"
        .set execlen, . - execmsg
