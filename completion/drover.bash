# bash completion for drover: subcommands, their options, run names (from
# ./runs, or the directory after --runs) for attach, stop, rm, logs, export,
# export-metrics, tensorboard and run --resume, and node names (from the run's nodes.tsv or logs/) for
# attach --stop and logs NODE. Installed by `make install` as
# share/bash-completion/completions/drover.

# The runs directory the command line names with --runs, else ./runs.
_drover_runs_dir() {
  local i
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ ${COMP_WORDS[i]} == --runs ]] && { echo "${COMP_WORDS[i + 1]}"; return; }
  done
  echo runs
}

# The run directories' names (newest last, as `drover ls` orders them).
_drover_run_names() {
  local dir
  dir=$(_drover_runs_dir)
  [[ -d $dir ]] || return
  local d
  for d in "$dir"/*/; do
    [[ -e ${d}events.log ]] && basename "$d"
  done
}

# The node names of the run named by the first word after the subcommand.
_drover_node_names() {
  _drover_node_names_all | sort -u
}
_drover_node_names_all() {
  local run=${COMP_WORDS[2]} dir
  [[ -d $run ]] && dir=$run || dir=$(_drover_runs_dir)/$run
  if [[ -f $dir/nodes.tsv ]]; then
    awk -F'\t' 'NR > 1 { print $1 }' "$dir/nodes.tsv"
  fi
  local f n
  for f in "$dir"/logs/*.log; do
    [[ -e $f ]] || continue
    n=$(basename "$f" .log)
    [[ $n =~ ^(.*)-([0-9]+)$ ]] && n="${BASH_REMATCH[1]}:${BASH_REMATCH[2]}"
    echo "$n"
  done
}

_drover() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
  local commands="repl run node attach ls stop scale rm tensorboard logs export export-metrics doctor hdfs help"
  COMPREPLY=()
  if ((COMP_CWORD == 1)); then
    COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
    return
  fi
  local cmd=${COMP_WORDS[1]} opts="" words=""
  case $prev in
    --runs | --run-dir | --log-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    -o | --output | --secret-file | --key) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --stop) COMPREPLY=($(compgen -W "$(_drover_node_names)" -- "$cur")); return ;;
    --resume) COMPREPLY=($(compgen -W "$(_drover_run_names)" -d -- "$cur")); return ;;
    --command | --hz | --timeout | --step | --wait | --port | --bind) return ;;
  esac
  case $cmd in
    run)
      opts="--dash --detach --resume --runs --help"
      [[ $cur != -* ]] && { COMPREPLY=($(compgen -f -X '!*.lua' -- "$cur") $(compgen -d -- "$cur")); return; } ;;
    attach)
      opts="--control --print --command --stop --key --secret-file --runs --hz --timeout --help"
      words=$(_drover_run_names) ;;
    stop)
      opts="--now --wait --timeout --key --runs --help"
      words=$(_drover_run_names) ;;
    scale)
      opts="--timeout --key --runs --help"
      if ((COMP_CWORD >= 3)) && [[ $cur != -* ]]; then words="worker="
      else words=$(_drover_run_names); fi ;;
    rm) opts="--runs --help"; words=$(_drover_run_names) ;;
    tensorboard) opts="--port --bind --runs --help"; words=$(_drover_run_names) ;;
    logs)
      opts="-f --follow --runs --help"
      if ((COMP_CWORD == 3)) && [[ $cur != -* ]]; then words=$(_drover_node_names)
      else words=$(_drover_run_names); fi ;;
    ls)
      opts="--help"
      [[ $cur != -* ]] && { COMPREPLY=($(compgen -d -- "$cur")); return; } ;;
    export) opts="--step --runs -o --help"; words=$(_drover_run_names) ;;
    export-metrics) opts="--csv --jsonl --runs -o --help"; words=$(_drover_run_names) ;;
    repl) opts="--help" ;;
    doctor) opts="--runs --timeout --help" ;;
    hdfs)
      opts="-r -f --offset --length --help"
      ((COMP_CWORD == 2)) && words="ls stat cat put get mkdir mv rm"
      [[ $COMP_CWORD -gt 2 && $cur != -* && $cur != hdfs:* && $cur != webhdfs:* ]] &&
        { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    help) words=$commands ;;
    node) opts="--coord --role --index --run-dir --bind --cpus --heartbeat-ms --timeout-ms" ;;
  esac
  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  elif [[ $cur == */* ]]; then COMPREPLY=($(compgen -d -- "$cur"))
  else COMPREPLY=($(compgen -W "$words" -- "$cur")); fi
}
complete -F _drover drover
