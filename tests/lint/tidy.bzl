"""clang-tidy as Bazel actions, so that Bazel caches each source's result (its key: the source,
every header it can include, the flags, .clang-tidy and the runner): tests/lint/check_tidy.sh
builds //... with

    --aspects=//tests/lint:tidy.bzl%tidy_aspect --output_groups=tidy

Invariants:
1. One action per C++ source of this repository's targets, tests/ left out (check_tidy.sh says
   why); it parses the source with the command the C++ toolchain compiles it with (cc_common,
   the target's copts, the command line's --copt/--cxxopt; not --per_file_copt, which sets only
   optimization levels here), less what clang does not know (tests/lint/tidy_action.py, with
   compile_commands.py's rules).
2. An action succeeds only with no finding in the source or in a header .clang-tidy's
   HeaderFilterRegex names; its output is then an empty file, which the disk cache keeps.
"""

load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "ACTION_NAMES")
load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _command(ctx, target, src):
    """The toolchain's compile command (compiler first) for src in target."""
    toolchain = find_cpp_toolchain(ctx)
    features = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    cc = target[CcInfo].compilation_context
    variables = cc_common.create_compile_variables(
        feature_configuration = features,
        cc_toolchain = toolchain,
        user_compile_flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts +
                             getattr(ctx.rule.attr, "copts", []),
        source_file = src.path,
        include_directories = cc.includes,
        quote_include_directories = cc.quote_includes,
        system_include_directories = cc.system_includes,
        framework_include_directories = cc.framework_includes,
        preprocessor_defines = cc.defines,
    )
    tool = cc_common.get_tool_for_action(
        feature_configuration = features,
        action_name = ACTION_NAMES.cpp_compile,
    )
    return [tool] + cc_common.get_memory_inefficient_command_line(
        feature_configuration = features,
        action_name = ACTION_NAMES.cpp_compile,
        variables = variables,
    ) + ["-c", src.path]

def _tidy_aspect_impl(target, ctx):
    if ctx.label.workspace_name != "" or CcInfo not in target:
        return [OutputGroupInfo(tidy = depset())]
    outs = []
    for attr in getattr(ctx.rule.attr, "srcs", []):
        for src in attr.files.to_list():
            if not src.is_source or src.extension not in ["cc", "cu"] or \
               src.path.startswith("tests/"):
                continue
            out = ctx.actions.declare_file("%s.tidy/%s.txt" % (ctx.label.name, src.path))
            ctx.actions.run(
                executable = ctx.executable._runner,
                arguments = [out.path, ctx.file._config.path] + _command(ctx, target, src),
                inputs = depset(
                    [src, ctx.file._config, ctx.file._rules],
                    transitive = [target[CcInfo].compilation_context.headers],
                ),
                outputs = [out],
                mnemonic = "ClangTidy",
                progress_message = "clang-tidy %s" % src.path,
                # A fixed PATH, not the caller's: the action's key (and so its entry in the disk
                # cache) is then the same for every checkout and every user's shell.
                env = {"PATH": "/usr/bin:/bin"},
                # In the execution root itself, where external/<library>/include is the link
                # to /usr/include that compile_commands.drop_system_dirs recognizes.
                execution_requirements = {"no-sandbox": "1"},
            )
            outs.append(out)
    return [OutputGroupInfo(tidy = depset(outs))]

tidy_aspect = aspect(
    implementation = _tidy_aspect_impl,
    fragments = ["cpp"],
    attrs = {
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
        "_config": attr.label(default = "//:.clang-tidy", allow_single_file = True),
        "_rules": attr.label(default = "//tests/lint:compile_commands.py", allow_single_file = True),
        "_runner": attr.label(
            default = "//tests/lint:tidy_action.py",
            allow_single_file = True,
            executable = True,
            cfg = "exec",
        ),
    },
)
